"""The GitHub workflows as a GitHub runner runs them, checked here without one.

What a runner gives a job is read from the sources of the actions pinned (recorded in
hack/workflow_actions.json, hack/workflow_actions.py): actions/setup-go installs the version its
``go-version`` or ``go-version-file`` names and exports ``GOTOOLCHAIN=local``, so the go command
refuses a module whose ``go`` line asks for more; in a called workflow ``github.workflow`` is the
caller's name. docs/ci.md says what each check stands for.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from opsuite_packaging.chart import MIN_KUBE_VERSION

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import workflow_actions

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
GO_VERSION_FILE = ".go-version"
TOOLS = ROOT / "hack" / "tools"
BUILD_TOOLS = "hack/build-tools.sh"


def _workflows() -> dict[str, dict[str, Any]]:
    return {
        path.name: yaml.safe_load(path.read_text()) for path in sorted(WORKFLOWS.glob("*.yaml"))
    }


def _jobs() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for file, workflow in _workflows().items():
        for job_id, job in workflow["jobs"].items():
            yield file, job_id, job


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _go_line(go_mod: str) -> str:
    found = re.search(r"^go (\d+(?:\.\d+)*)\s*$", go_mod, re.M)
    assert found, "a go.mod without a go line"
    return found.group(1)


def _setup_go_version(step: dict[str, Any]) -> str:
    """The version actions/setup-go installs for ``step``, read as it reads its inputs: a
    ``go-version`` first, else the ``go-version-file``, whose go.mod ``go`` line it takes (its
    ``toolchain`` line too, but a runner's environment has no GOTOOLCHAIN=local yet; none of
    the repo's go.mod files has one, checked below) or a plain file's whole content."""
    inputs = step.get("with") or {}
    if "go-version" in inputs:
        return str(inputs["go-version"])
    path = ROOT / str(inputs["go-version-file"])
    text = path.read_text()
    if path.name in ("go.mod", "go.work"):
        return _go_line(text)
    return text.strip()


# --- what a job builds with Go --------------------------------------------------------------


def _make_recipes() -> dict[str, tuple[list[str], str]]:
    """Each Makefile target: (its prerequisites, its recipe's text)."""
    targets: dict[str, tuple[list[str], list[str]]] = {}
    recipe: list[str] = []
    for line in (ROOT / "Makefile").read_text().splitlines():
        rule = re.match(r"^([a-z][a-z0-9-]*):(?!=)([^#]*)", line)
        if rule:
            recipe = []
            targets[rule.group(1)] = (rule.group(2).split(), recipe)
        elif line.startswith("\t"):
            recipe.append(line)
    return {name: (pre, "\n".join(lines)) for name, (pre, lines) in targets.items()}


def _code(line: str) -> str:
    """A shell or make line without its comment."""
    return re.sub(r"(?:^|\s)#.*$", "", line)


def _expand(text: str, seen: set[str]) -> str:
    """``text`` with the recipes of the make targets and the text of the repo's scripts it
    runs, recursively: what a step really executes."""
    recipes = _make_recipes()
    out = [text]
    for line in map(_code, text.splitlines()):
        for match in re.finditer(r"(?:^|[;&|(]\s*|\s)(?:make|\$\(MAKE\))\s+([^;&|)\n]*)", line):
            for word in match.group(1).split():
                if word in recipes and f"make:{word}" not in seen:
                    seen.add(f"make:{word}")
                    prerequisites, recipe = recipes[word]
                    out.append(_expand(recipe + " ".join(f"make {p}" for p in prerequisites), seen))
        for script in re.findall(r"\b((?:hack|bench)/[\w./-]+\.sh)\b", line):
            if script not in seen and (ROOT / script).is_file():
                seen.add(script)
                out.append(_expand((ROOT / script).read_text(), seen))
    return "\n".join(out)


def _default_tools() -> list[str]:
    text = (ROOT / BUILD_TOOLS).read_text()
    found = re.search(r"\|\| tools=\(([^)]*)\)", text)
    assert found, "build-tools.sh's default list"
    return found.group(1).split()


def _go_modules_built(text: str) -> set[Path]:
    """The repo's Go modules a command text builds or downloads with the go command."""
    modules: set[Path] = set()
    for line in map(_code, text.splitlines()):
        for match in re.finditer(
            r"(?:^|\s|\")(?:\$root/)?hack/build-tools\.sh\"?([^;&|\n]*)", line
        ):
            words = [w for w in match.group(1).split() if re.fullmatch(r"[a-z][a-z0-9-]*", w)]
            for name in words or _default_tools():
                modules.add(TOOLS / name)
        for name in re.findall(r"module-dir\.sh\"?\s+\"?(?:\$root/)?hack/tools/([\w-]+)", line):
            modules.add(TOOLS / name)
        if "bench/reference/build.sh" in line:
            modules.add(ROOT / "bench" / "reference")
    return modules


def _go_installs(text: str) -> set[str]:
    """``module@version`` of every ``go install`` in a command text (variables of the job's
    env substituted by the caller)."""
    return set(re.findall(r"\bgo install \"?([\w./-]+@[\w.${}-]+)", text))


def _job_text(workflow: dict[str, Any], job: dict[str, Any]) -> str:
    env = {**(workflow.get("env") or {}), **(job.get("env") or {})}
    text = "\n".join(str(step.get("run", "")) for step in job.get("steps", []))
    for name, value in env.items():
        text = text.replace(f"${name}", str(value)).replace(f"${{{name}}}", str(value))
    return _expand(text, set())


def _go_jobs() -> list[tuple[str, str, dict[str, Any], str]]:
    jobs = []
    for file, job_id, job in _jobs():
        if "steps" not in job:
            continue
        text = _job_text(_workflows()[file], job)
        if _go_modules_built(text) or _go_installs(text):
            jobs.append((file, job_id, job, text))
    return jobs


def _setup_go_steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in job.get("steps", []) if "actions/setup-go@" in str(s.get("uses", ""))]


def test_the_analysis_finds_the_go_builds_of_each_job() -> None:
    """The reading of a job is not vacuous: the check job builds what make unit and make lint
    build (kube-score for make lint); the e2e job installs kind."""
    jobs = {(file, job_id): text for file, job_id, _, text in _go_jobs()}
    checks = _go_modules_built(jobs[("ci.yaml", "checks")])
    assert {
        TOOLS / "opm",
        TOOLS / "actionlint",
        TOOLS / "bundle-validate",
        TOOLS / "registry",
        TOOLS / "kube-score",
    } <= checks
    assert any(m.startswith("sigs.k8s.io/kind@") for m in _go_installs(jobs[("e2e.yaml", "e2e")]))
    assert TOOLS / "olm" in _go_modules_built(jobs[("e2e.yaml", "olm")])


@pytest.mark.parametrize(
    ("file", "job_id"), [(f, j) for f, j, _, _ in _go_jobs()], ids=lambda v: str(v)
)
def test_every_go_module_a_job_builds_accepts_the_go_its_setup_go_installs(
    file: str, job_id: str
) -> None:
    """With GOTOOLCHAIN=local (setup-go exports it), a module whose go line is newer than the
    installed Go is refused: each module the job builds, downloads or installs must accept it."""
    workflow = _workflows()[file]
    job = workflow["jobs"][job_id]
    setups = _setup_go_steps(job)
    assert setups, f"{file} {job_id} runs Go without actions/setup-go (the runner's Go is unknown)"
    installed = _version(_setup_go_version(setups[0]))
    text = _job_text(workflow, job)
    for module in sorted(_go_modules_built(text)):
        wanted = _go_line((module / "go.mod").read_text())
        assert _version(wanted) <= installed, (
            f"{file} {job_id}: {module.relative_to(ROOT)} asks for go {wanted}, "
            f"setup-go installs {'.'.join(map(str, installed))} with GOTOOLCHAIN=local"
        )
    for spec in sorted(_go_installs(text)):
        wanted = _go_line(_downloaded_go_mod(spec))
        assert _version(wanted) <= installed, (
            f"{file} {job_id}: go install {spec} asks for go {wanted}"
        )


def _downloaded_go_mod(spec: str) -> str:
    """The go.mod of ``module@version`` through the module proxy (the go command's own)."""
    done = subprocess.run(
        ["go", "mod", "download", "-json", spec], capture_output=True, text=True, check=False
    )
    info = json.loads(done.stdout or "{}")
    assert "GoMod" in info, f"go mod download {spec}: {done.stderr or info}"
    return Path(info["GoMod"]).read_text()


def test_one_go_version_for_every_setup_go_step_and_every_go_module() -> None:
    """One file names the Go of every job and of every local tool build (build-tools.sh sets
    GOTOOLCHAIN from it): every setup-go step reads it, and no go.mod asks for more, nor
    carries a toolchain line that setup-go would read instead."""
    pinned = (ROOT / GO_VERSION_FILE).read_text().strip()
    assert re.fullmatch(r"1\.\d+\.\d+", pinned)
    steps = [(f, j, s) for f, j, job in _jobs() for s in _setup_go_steps(job)]
    assert steps
    for file, job_id, step in steps:
        assert step.get("with", {}).get("go-version-file") == GO_VERSION_FILE, (file, job_id)
        assert "go-version" not in step.get("with", {}), (file, job_id)
    for go_mod in [*TOOLS.glob("*/go.mod"), ROOT / "bench" / "reference" / "go.mod"]:
        text = go_mod.read_text()
        assert _version(_go_line(text)) <= _version(pinned), go_mod
        assert not re.search(r"^toolchain ", text, re.M), go_mod
    assert f'GOTOOLCHAIN="go$(<"$root/{GO_VERSION_FILE}")"' in (ROOT / BUILD_TOOLS).read_text()


# --- concurrency -----------------------------------------------------------------------------


def _evaluate(expression: str, context: dict[str, str]) -> str:
    """A concurrency group with its ``${{ github.* }}`` expressions resolved."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in context, f"an expression the check cannot resolve: {name}"
        return context[name]

    return re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", value, expression)


def _called(workflow: dict[str, Any]) -> list[str]:
    return [
        job["uses"].removeprefix("./.github/workflows/")
        for job in workflow["jobs"].values()
        if str(job.get("uses", "")).startswith("./.github/workflows/")
    ]


@pytest.mark.parametrize("caller", sorted(_workflows()))
def test_a_workflow_and_those_it_calls_have_distinct_concurrency_groups(caller: str) -> None:
    """In a called workflow ``github.workflow`` is the caller's name: groups built from it alone
    collide, and with cancel-in-progress one called workflow cancels the other."""
    workflows = _workflows()
    context = {
        "github.workflow": workflows[caller]["name"],
        "github.ref": "refs/tags/v1.2.3",
        "github.ref_name": "v1.2.3",
        "github.head_ref": "",
        "github.run_id": "1",
    }
    groups = {caller: _evaluate(workflows[caller]["concurrency"]["group"], context)}
    for called in _called(workflows[caller]):
        group = _evaluate(workflows[called]["concurrency"]["group"], context)
        assert group not in groups.values(), f"{called} shares {group!r} with {groups}"
        groups[called] = group


# --- the actions' runtimes -------------------------------------------------------------------


def test_every_action_is_pinned_by_sha_and_recorded_with_its_runtime() -> None:
    """Every ``uses:`` names a commit recorded in hack/workflow_actions.json with the runtime
    its action.yml declares at that commit (CI's check step reads them from GitHub)."""
    record = workflow_actions.load()
    used = workflow_actions.used()
    assert used
    for action in used:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action), action
        assert action in record, f"{action} is not in {workflow_actions.RECORD.name}"
    assert set(record) == set(used), "the record lists an action no workflow uses"


def test_no_action_runs_on_a_node_runtime_github_removed() -> None:
    """GitHub's runners dropped Node 20: an action declaring it runs only while the runner
    forces a newer Node on it. Composite actions are judged by the actions they use."""
    for action, entry in workflow_actions.load().items():
        assert workflow_actions.runtime_supported(entry["using"]), f"{action}: {entry}"
        for nested in entry.get("uses", []):
            nested_entry = workflow_actions.load().get(nested)
            assert nested_entry is None or workflow_actions.runtime_supported(
                nested_entry["using"]
            ), f"{action} uses {nested}"


def test_the_runtime_check_refuses_node20() -> None:
    assert not workflow_actions.runtime_supported("node20")
    assert not workflow_actions.runtime_supported("node16")
    assert workflow_actions.runtime_supported("node24")
    assert workflow_actions.runtime_supported("composite")


# --- builds for kind, caches -----------------------------------------------------------------


def test_images_loaded_into_kind_carry_no_attestations() -> None:
    """``kind load docker-image`` of an image with provenance or SBOM attestations fails on a
    Docker whose image store is containerd (kind issues 3795 and 4247): every image the e2e
    jobs build for kind is built without them."""
    for file, job_id, job in _jobs():
        for step in job.get("steps", []):
            inputs = step.get("with") or {}
            if "docker/build-push-action@" in str(step.get("uses", "")) and inputs.get("load"):
                assert inputs.get("provenance") is False, (file, job_id, step.get("name"))
                assert inputs.get("sbom") is False, (file, job_id, step.get("name"))
        for line in _job_text(_workflows()[file], job).splitlines():
            if "docker buildx build" in line and "--load" in line:
                assert "--provenance=false" in line, (file, job_id, line)
                assert "--sbom=false" in line, (file, job_id, line)


def test_tool_caches_are_per_job_and_keyed_on_what_builds_the_tools() -> None:
    """Jobs build different tools: one shared key lets the first job to save win and the others
    rebuild every run. The key covers the modules, the build script and the Go version."""
    keys: dict[str, str] = {}
    for file, job_id, job in _jobs():
        for step in job.get("steps", []):
            inputs = step.get("with") or {}
            if "actions/cache@" not in str(step.get("uses", "")) or "opsuite/tools" not in str(
                inputs.get("path")
            ):
                continue
            key = str(inputs["key"]).replace("${{ github.job }}", job_id)
            for covered in ("hack/tools/**", BUILD_TOOLS, GO_VERSION_FILE):
                assert f"'{covered}'" in key, (file, job_id, key)
            prefix = key.split("${{ hashFiles", 1)[0]
            restore = str(inputs.get("restore-keys", prefix)).replace("${{ github.job }}", job_id)
            assert restore.strip() == prefix, (file, job_id)
            assert prefix not in keys.values(), f"{file} {job_id} shares the prefix {prefix!r}"
            keys[f"{file}/{job_id}"] = prefix
    assert len(keys) >= 3


def test_an_entry_is_read_from_the_action_yml_at_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``check`` and ``update`` read, served by a local HTTP server laid out as GitHub's
    raw file host: a JavaScript action's runtime, a composite action's nested actions, and an
    action in a subdirectory of its repository with an action.yaml."""
    sha = "0" * 40
    files = {
        f"o/node/{sha}/action.yml": "runs:\n  using: node20\n  main: index.js\n",
        f"o/comp/{sha}/action.yml": "runs:\n  using: composite\n  steps:\n"
        "    - uses: o/node@v1\n    - run: echo\n",
        f"o/mono/{sha}/sub/action.yaml": "runs:\n  using: node24\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        monkeypatch.setattr(workflow_actions, "SOURCE", f"http://127.0.0.1:{server.server_port}")
        assert workflow_actions.entry(f"o/node@{sha}", "v1") == {"version": "v1", "using": "node20"}
        assert workflow_actions.entry(f"o/comp@{sha}", "v2") == {
            "version": "v2",
            "using": "composite",
            "uses": ["o/node@v1"],
        }
        assert workflow_actions.entry(f"o/mono/sub@{sha}", "v3")["using"] == "node24"
        with pytest.raises(SystemExit, match=r"no action\.yml"):
            workflow_actions.entry(f"o/missing@{sha}", "v4")
        server.shutdown()


def test_the_kubernetes_versions_claimed_are_the_ones_tested() -> None:
    """The charts' kubeVersion and the CSVs' minKubeVersion name the oldest minor e2e.yaml's
    kind matrix runs, and the matrix runs every minor from there to its newest."""
    matrix = _workflows()["e2e.yaml"]["jobs"]["e2e"]["strategy"]["matrix"]["node-image"]
    minors = sorted(
        int(re.fullmatch(r"kindest/node:v1\.(\d+)\.\d+@sha256:[0-9a-f]{64}", image).group(1))  # type: ignore[union-attr]
        for image in matrix
    )
    assert minors == list(range(minors[0], minors[-1] + 1))
    assert f"1.{minors[0]}.0" == MIN_KUBE_VERSION
    for csv in (ROOT / "bundle").glob("*/manifests/*.clusterserviceversion.yaml"):
        assert yaml.safe_load(csv.read_text())["spec"]["minKubeVersion"] == MIN_KUBE_VERSION
    for chart in (ROOT / "charts").glob("*/Chart.yaml"):
        assert yaml.safe_load(chart.read_text())["kubeVersion"] == f">={MIN_KUBE_VERSION}-0"


def test_the_release_pins_every_image_it_publishes_by_digest_before_naming_it() -> None:
    """The charts are packaged with their default image by digest, and the bundle images are
    built (with --push) from CSVs naming the operator images by digest (#31, item 9)."""
    release = _workflows()["release.yaml"]["jobs"]
    charts = "\n".join(step.get("run", "") for step in release["charts"]["steps"])
    assert charts.index("pin_digests.py --chart") < charts.index("helm package")
    bundles = "\n".join(step.get("run", "") for step in release["bundles"]["steps"])
    assert "hack/build-olm-images.sh" in bundles
    assert "--push" in bundles
    script = (ROOT / "hack" / "build-olm-images.sh").read_text()
    assert script.index('pin_digests.py "$work/$package/manifests"') < script.index(
        'docker buildx build "${output[@]}" -f "$work/$package/bundle.Dockerfile"'
    )
