// Argo CD's Lua interpreter (gopher-lua) around the health check in docs/argocd/health.lua,
// for hack/build-tools.sh.
module opsuite.dev/hack/tools/argocd-health

go 1.26.8

require github.com/yuin/gopher-lua v1.1.1
