"""Stage keys (issue 8): computed code versions, operational config fields, hub revisions."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
import typing
from pathlib import Path

import pytest

from configs.fields import operational_fields
from configs.schema import PipelineConfig
from orchestrator.code_version import code_version
from orchestrator.keys import hub_dataset_revisions, resolve_hub_revision, stage_key
from orchestrator.runner import run_stage
from orchestrator.stages import STAGES, StageSpec, get_stage
from orchestrator.store import ArtifactRef, ArtifactStore
from stagekit.paths import REPO_ROOT

PACKAGES = ("assets", "configs", "data_prep", "datalib", "evaluation", "orchestrator", "stagekit", "rollout", "sandbox",
            "training")


@pytest.fixture()
def repo_copy(tmp_path) -> Path:
    """The project's packages copied aside, so tests can edit sources freely."""
    root = tmp_path / "repo"
    for pkg in PACKAGES:
        shutil.copytree(REPO_ROOT / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "README.md").write_text((REPO_ROOT / "README.md").read_text())
    shutil.copytree(REPO_ROOT / "tests" / "orchestrator", root / "tests" / "orchestrator",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _versions(root: Path) -> dict[str, str]:
    return {s.name: code_version(s.module, root).digest for s in STAGES}


def _edit_function_body(path: Path) -> None:
    """Add a statement to the body of the first function with a return (a sibling of that line)."""
    source = path.read_text()
    edited, n = re.subn(r"^( +)return (.+)$", r"\1_edited = None\n\1return \2", source, count=1, flags=re.M)
    assert n == 1, f"no function with a return in {path}"
    path.write_text(edited)


def test_function_body_edit_reruns_the_stages_that_import_it(repo_copy):
    before = _versions(repo_copy)
    imports = {s.name: code_version(s.module, repo_copy).modules for s in STAGES}
    assert "datalib.integers" in imports["rl_curation"]
    assert "datalib.integers" not in imports["assets"] and "datalib.integers" not in imports["cold_start"]
    _edit_function_body(repo_copy / "datalib" / "integers.py")
    after = _versions(repo_copy)
    changed = {name for name in before if before[name] != after[name]}
    assert "rl_curation" in changed
    assert "assets" not in changed and "cold_start" not in changed
    assert changed == {name for name, mods in imports.items() if "datalib.integers" in mods}


def test_comments_docs_and_tests_change_no_key(repo_copy):
    before = _versions(repo_copy)
    reward = repo_copy / "rollout" / "reward.py"
    reward.write_text("# a comment-only change\n\n" + reward.read_text().replace("\n\n\n", "\n\n\n# moved\n\n", 1))
    (repo_copy / "README.md").write_text("edited\n")
    (repo_copy / "tests" / "orchestrator" / "test_keys.py").write_text("# edited\n")
    assert _versions(repo_copy) == before


def test_a_docstring_or_statement_in_an_imported_module_counts(repo_copy):
    before = code_version("data_prep.rl_curation", repo_copy)
    paths = repo_copy / "assets" / "paths.py"
    paths.write_text(paths.read_text() + "\nLIMIT = 3\n")
    assert code_version("data_prep.rl_curation", repo_copy).digest != before.digest


def test_a_module_started_as_a_child_process_is_covered():
    # sandbox.server runs the model's code in another process: its code shapes tool output.
    modules = code_version("data_prep.rl_curation").modules
    assert "sandbox.server" in modules and "sandbox.zygote" in modules
    assert not any(m.split(".")[0] in ("orchestrator", "stagekit", "configs") for m in modules)


def test_library_versions_are_part_of_the_version():
    libs = code_version("data_prep.rl_curation").libraries
    assert {"torch", "transformers"} <= set(libs)
    assert "pydantic" not in libs and "prefect" not in libs


def test_edited_helper_reruns_its_stage_and_downstream_not_upstream(tmp_path, monkeypatch):
    """End to end through the runner, on a toy project: a -> b -> c, b imports a helper."""
    proj = tmp_path / "proj"
    proj.mkdir()
    stage_src = textwrap.dedent('''
        import json, os
        {extra}
        def run(cfg, inputs, out_dir, name):
            with open(os.environ["RSTAR_TOY_LOG"], "a") as log:
                log.write(name + "\\n")
            up = {{k: (v / "value.txt").read_text() for k, v in inputs.items()}}
            (out_dir / "value.txt").write_text(json.dumps([name, {value}, up], sort_keys=True))
            return {{}}
    ''')
    (proj / "keytoy_a.py").write_text(stage_src.format(extra="", value="1"))
    (proj / "keytoy_b.py").write_text(stage_src.format(extra="from keytoy_helper import value", value="value()"))
    (proj / "keytoy_c.py").write_text(stage_src.format(extra="", value="3"))
    (proj / "keytoy_helper.py").write_text("def value():\n    return 2\n")
    monkeypatch.syspath_prepend(str(proj))
    log = tmp_path / "runs.log"
    monkeypatch.setenv("RSTAR_TOY_LOG", str(log))
    stages = (
        StageSpec("a", "keytoy_a", lambda c: {"cfg": c.rl.stage1, "name": "a"}),
        StageSpec("b", "keytoy_b", lambda c: {"cfg": c.rl.stage2, "name": "b"}, inputs={"a": "a"}),
        StageSpec("c", "keytoy_c", lambda c: {"cfg": c.rl.stage3, "name": "c"}, inputs={"b": "b"}),
    )
    store = ArtifactStore(str(tmp_path / "store"))

    def pipeline() -> None:
        refs: dict[str, ArtifactRef] = {}
        for spec in stages:
            refs[spec.name] = run_stage(spec, PipelineConfig(), {n: refs[n] for n in spec.upstream}, store)

    pipeline()
    pipeline()
    assert log.read_text().split() == ["a", "b", "c"]
    (proj / "keytoy_helper.py").write_text("def value():\n    # same comment-free logic, new value\n    return 5\n")
    for name in ("keytoy_b", "keytoy_helper"):
        sys.modules.pop(name, None)  # a new process would import the edited file
    pipeline()
    assert log.read_text().split() == ["a", "b", "c", "b", "c"]


# --- operational fields: how a stage runs, never what it computes ---------------------


def _other_value(annotation: object, value: object) -> object:
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Literal:
        return next(a for a in args if a != value)
    if value is None or (args and type(None) in args and not isinstance(value, list)):
        inner = next(a for a in args if a is not type(None))
        return _other_value(inner, _sample(inner))
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value / 2 if value else 1.0
    if isinstance(value, str):
        return value + "-other"
    if isinstance(value, dict):  # stage name -> a work pool, or a thread count
        return {**value, "sft": 3 if typing.get_args(annotation)[1:] == (int,) else "rstar-gpu"}
    if isinstance(value, list):
        return [*value, "http://10.0.0.9:30000"] if not value or isinstance(value[0], str) else value[:-1]
    raise AssertionError(f"no test value for {annotation!r}")


def _sample(annotation: object) -> object:
    return {int: 3, float: 1.5, str: "x"}.get(annotation, None)


def _with(cfg: PipelineConfig, dotted: str) -> PipelineConfig:
    data = cfg.model_dump(mode="json")
    node, model = data, type(cfg)
    *parents, leaf = dotted.split(".")
    for part in parents:
        node, model = node[part], model.model_fields[part].annotation
    node[leaf] = _other_value(model.model_fields[leaf].annotation, node[leaf])
    return PipelineConfig.model_validate(data)


FAKE_UPSTREAM = {s.name: ArtifactRef(stage=s.name, key="k", digest=f"d-{s.name}", uri="/x") for s in STAGES}


@pytest.mark.parametrize("field", operational_fields(PipelineConfig))
def test_operational_field_changes_no_stage_key(field):
    cfg = PipelineConfig()
    other = _with(cfg, field)
    assert other != cfg
    for spec in STAGES:
        ups = {n: FAKE_UPSTREAM[n] for n in spec.upstream}
        assert stage_key(spec, other, ups) == stage_key(spec, cfg, ups), f"{field} moved {spec.name}'s key"


def test_the_operational_set_covers_the_issue_list():
    fields = set(operational_fields(PipelineConfig))
    for expected in ("sandbox.urls", "sandbox.exec_workers", "sandbox.batch_window_ms", "sandbox.request_timeout_s",
                     "rollout.sglang_urls", "rollout.hf_engines", "rollout.hf_batch_window_s",
                     "data.rl_curation.agreement.sglang_urls"):
        assert expected in fields


@pytest.mark.parametrize("field", [
    "rl.temperature", "data.rl_curation.agreement.temperature", "data.rl_curation.agreement.samples_per_problem",
    "data.rl_curation.agreement.seed", "data.rl_curation.agreement.model", "model.base", "rl.rollouts_per_prompt",
    "sandbox.timeout_s", "rollout.top_p",
])
def test_fields_that_shape_a_result_rerun_their_stage(field):
    cfg = PipelineConfig()
    other = _with(cfg, field)
    moved = [s.name for s in STAGES
             if stage_key(s, other, {n: FAKE_UPSTREAM[n] for n in s.upstream})
             != stage_key(s, cfg, {n: FAKE_UPSTREAM[n] for n in s.upstream})]
    assert moved, f"changing {field} reran nothing"


def test_changing_an_operational_field_is_a_cache_hit_through_the_runner(tmp_path, monkeypatch):
    (tmp_path / "optoy.py").write_text(textwrap.dedent('''
        import os
        def run(cfg, rollout, sandbox, inputs, out_dir):
            with open(os.environ["RSTAR_TOY_LOG"], "a") as log:
                log.write("a\\n")
            (out_dir / "value.txt").write_text(f"{cfg.steps} {rollout.top_p}")
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    log = tmp_path / "runs.log"
    monkeypatch.setenv("RSTAR_TOY_LOG", str(log))
    spec = StageSpec("a", "optoy", lambda c: {"cfg": c.rl.stage1, "rollout": c.rollout, "sandbox": c.sandbox})
    store = ArtifactStore(str(tmp_path / "store"))
    cfg = PipelineConfig()
    first = run_stage(spec, cfg, {}, store)
    moved = cfg.model_copy(deep=True)
    moved.sandbox.urls = ["http://10.1.2.3:8711"]
    moved.rollout.hf_engines = 4
    moved.rollout.sglang_urls = ["http://10.1.2.4:30000"]
    assert run_stage(spec, moved, {}, store) == first
    moved.rollout.top_p = 0.9
    assert run_stage(spec, moved, {}, store) != first
    assert log.read_text().split() == ["a", "a"]


# --- hub datasets ------------------------------------------------------------------------


def test_hub_dataset_revision_is_in_the_key_and_manifest(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    resolve_hub_revision.cache_clear()
    cfg = PipelineConfig.model_validate({"data": {"rl_curation": {"sources": [
        {"source": "dapo_math", "location": "BytedTsinghua-SIA/DAPO-Math-17k", "revision": "abc123"}]}}})
    spec = get_stage("rl_curation")
    ups = {"assets": FAKE_UPSTREAM["assets"]}
    sections = {"cfg": cfg.data.rl_curation.model_dump(mode="json")}
    assert hub_dataset_revisions(sections) == {"BytedTsinghua-SIA/DAPO-Math-17k": "abc123"}
    pinned_other = PipelineConfig.model_validate({"data": {"rl_curation": {"sources": [
        {"source": "dapo_math", "location": "BytedTsinghua-SIA/DAPO-Math-17k", "revision": "def456"}]}}})
    assert stage_key(spec, cfg, ups) != stage_key(spec, pinned_other, ups)


def test_online_revision_resolves_to_a_commit(monkeypatch):
    import huggingface_hub

    class FakeApi:  # the hub is unreachable here; this checks what we ask it and record
        def dataset_info(self, repo_id, revision=None, timeout=None):
            return type("Info", (), {"sha": f"sha-of-{repo_id}@{revision or 'main'}"})()

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    resolve_hub_revision.cache_clear()
    try:
        assert resolve_hub_revision("org/data", None) == "sha-of-org/data@main"
        assert resolve_hub_revision("org/data", "v1") == "sha-of-org/data@v1"
    finally:
        resolve_hub_revision.cache_clear()


def test_a_config_loaded_from_its_own_dump_has_the_same_keys():
    """Defaults are typed as if loaded (validate_default): `epochs: float = 3` must key like 3.0."""
    from configs.load import load_config

    for cfg in (PipelineConfig(), load_config(REPO_ROOT / "configs" / "tiny.yaml")):
        again = PipelineConfig.model_validate_json(cfg.model_dump_json())
        for spec in STAGES:
            ups = {n: FAKE_UPSTREAM[n] for n in spec.upstream}
            assert stage_key(spec, again, ups) == stage_key(spec, cfg, ups), spec.name


def test_a_stage_keyed_by_its_starter_refuses_to_run_under_another_key(tmp_path, monkeypatch):
    """The rehearsal's bug: a file edited while a GPU stage ran on its pool moved the flow's
    lookup key, so hours of work finished as 'the store has no artifact'. The starter's key now
    travels with the stage (launch.json, the rstar-stage parameter) and a process that computes
    another one stops before any work, saying why."""
    from flows.rstar_stage import rstar_stage
    from orchestrator.keys import KeyMismatchError

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "keytoy_once.py").write_text("def run(cfg, inputs, out_dir):\n    (out_dir / 'ran').write_text('')\n")
    monkeypatch.syspath_prepend(str(proj))
    spec = StageSpec("once", "keytoy_once", lambda c: {"cfg": c.rl.stage1})
    cfg = PipelineConfig.model_validate({"run": {"artifacts_root": str(tmp_path / "store")}})
    store = ArtifactStore(cfg.run.artifacts_root)
    started_with = stage_key(spec, cfg, {})
    (proj / "keytoy_once.py").write_text("def run(cfg, inputs, out_dir):\n    (out_dir / 'ran2').write_text('')\n")
    expected = rf"computes key \w+, but the run that started it computed {started_with}"
    with pytest.raises(KeyMismatchError, match=expected):
        run_stage(spec, cfg, {}, store, expected_key=started_with)
    assert store.lookup("once", started_with) is None and store.lookup("once", stage_key(spec, cfg, {})) is None
    monkeypatch.setattr("flows.rstar_stage.load_stages", lambda path: (spec,))
    with pytest.raises(KeyMismatchError, match="another checkout on a pool's machine"):
        rstar_stage.fn(stage="once", config=cfg.model_dump(mode="json"), upstream={}, key=started_with)
    assert run_stage(spec, cfg, {}, store, expected_key=stage_key(spec, cfg, {})) is not None
