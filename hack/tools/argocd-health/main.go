// argocd-health runs an Argo CD health check as Argo CD runs it: the Lua script under
// gopher-lua (Argo CD's interpreter, Lua 5.1), the object as the global `obj`, and the table
// the script returns read as the health status and message. e2e/test_argocd_health.py runs
// docs/argocd/health.lua with it against the objects the e2e suite observed.
//
// Usage: argocd-health SCRIPT < OBJECT.json   prints {"status": "...", "message": "..."}
package main

import (
	"encoding/json"
	"fmt"
	"os"

	lua "github.com/yuin/gopher-lua"
)

type health struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// value turns decoded JSON into Lua values as Argo CD's decodeValue does: objects and arrays
// become tables (arrays 1-based), numbers float64.
func value(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		table := L.NewTable()
		for key, item := range v {
			table.RawSetString(key, value(L, item))
		}
		return table
	case []any:
		table := L.NewTable()
		for i, item := range v {
			table.RawSetInt(i+1, value(L, item))
		}
		return table
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	default:
		return lua.LNil
	}
}

func run(scriptPath string) (health, error) {
	script, err := os.ReadFile(scriptPath)
	if err != nil {
		return health{}, err
	}
	var obj map[string]any
	if err := json.NewDecoder(os.Stdin).Decode(&obj); err != nil {
		return health{}, fmt.Errorf("reading the object: %w", err)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", value(L, obj))
	if err := L.DoString(string(script)); err != nil {
		return health{}, err
	}
	table, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return health{}, fmt.Errorf("the script returned %s, not a table", L.Get(-1).Type())
	}
	return health{
		Status:  lua.LVAsString(table.RawGetString("status")),
		Message: lua.LVAsString(table.RawGetString("message")),
	}, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health SCRIPT < OBJECT.json")
		os.Exit(2)
	}
	result, err := run(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(result); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
