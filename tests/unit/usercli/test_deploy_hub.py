"""`llmkube deploy org/repo-GGUF:Q4_K_M`: a GGUF repository named the way llama.cpp names it, the
file chosen from the Hub's own file list (a Hub stand-in that speaks its API, llmkube_testing/hfhub.py),
and when the quantization does not exist, the ones that do."""

from collections.abc import Iterator

import pytest
import yaml
from llmkube_testing.hfhub import HubState, running_hub

from llmkube.cli import main
from llmkube.plan.model.hub_files import Chosen, NamedModel, choose_files, quantization_of, split_quantization
from llmkube.usercli.hub import not_chosen_message

REPO = "org/Tiny-Chat-GGUF"
FILES = {
    "README.md": b"# tiny\n",
    "tiny-chat-Q4_K_M.gguf": b"GGUF4",
    "tiny-chat-Q8_0.gguf": b"GGUF8",
    "tiny-chat-IQ3_XXS.gguf": b"GGUF3",
    "mmproj-tiny-chat-f16.gguf": b"GGUFp",
    "F16/tiny-chat-F16-00001-of-00002.gguf": b"GGUFa",
    "F16/tiny-chat-F16-00002-of-00002.gguf": b"GGUFb",
}
HAS = "F16, IQ3_XXS, Q4_K_M, Q8_0"


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("org/repo:Q4_K_M", NamedModel("org/repo", "Q4_K_M")),
        ("hf://org/repo:q8_0", NamedModel("hf://org/repo", "q8_0")),
        ("hf://org/repo@main:Q8_0", NamedModel("hf://org/repo@main", "Q8_0")),
        ("org/repo", NamedModel("org/repo", None)),
        ("https://host:8443/model.gguf", NamedModel("https://host:8443/model.gguf", None)),
        ("https://host/x.gguf:Q4", NamedModel("https://host/x.gguf:Q4", None)),  # not a repository
        ("file:///m/a:b.gguf", NamedModel("file:///m/a:b.gguf", None)),
    ],
)
def test_split_quantization(source: str, named: NamedModel) -> None:
    assert split_quantization(source) == named


@pytest.mark.parametrize(
    ("name", "quantization"),
    [
        ("Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Q4_K_M"),
        ("model.IQ3_XXS.gguf", "IQ3_XXS"),
        ("dir/model-q8_0.gguf", "Q8_0"),
        ("Llama-3-70B-F16-00001-of-00004.gguf", "F16"),
        ("model-bf16.gguf", "BF16"),
        ("model.gguf", None),
        ("Q4_K_M/model.gguf", None),  # the folder does not name the file's quantization
    ],
)
def test_quantization_of(name: str, quantization: str | None) -> None:
    assert quantization_of(name) == quantization


@pytest.mark.parametrize(
    ("files", "asked", "chosen"),
    [
        (FILES, "Q4_K_M", Chosen(("tiny-chat-Q4_K_M.gguf",), "Q4_K_M")),
        (FILES, "q8_0", Chosen(("tiny-chat-Q8_0.gguf",), "Q8_0")),
        (
            FILES,
            "F16",
            Chosen(("F16/tiny-chat-F16-00001-of-00002.gguf", "F16/tiny-chat-F16-00002-of-00002.gguf"), "F16"),
        ),
        ({"a.Q4_K_M.gguf": b"", "mmproj-a.gguf": b""}, None, Chosen(("a.Q4_K_M.gguf",), "Q4_K_M")),
        ({"model.gguf": b""}, None, Chosen(("model.gguf",), None)),
        (
            FILES,
            "Q5_K_M",
            f'the Hugging Face repository "{REPO}" has no Q5_K_M GGUF file; it has: {HAS}',
        ),
        (
            FILES,
            None,
            f'the Hugging Face repository "{REPO}" has 4 GGUF models: name one as {REPO}:QUANT '
            "(F16, IQ3_XXS, Q4_K_M, Q8_0) or with --file",
        ),
        (
            {"config.json": b""},
            None,
            f'the Hugging Face repository "{REPO}" has no GGUF model file (llama.cpp serves GGUF)',
        ),
    ],
)
def test_choose_files(files: dict[str, bytes], asked: str | None, chosen: Chosen | str) -> None:
    found = choose_files(REPO, files, asked)
    assert (found if isinstance(found, Chosen) else not_chosen_message(found)) == chosen


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    with running_hub() as state:
        state.add(REPO, FILES)
        state.add("org/Private-GGUF", {"p-Q4_K_M.gguf": b"GGUF"}, private=True)
        monkeypatch.setenv("HF_ENDPOINT", state.base)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        yield state


def deployed(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, object]], str]:
    code = main(["deploy", *args, "--dry-run", "-o", "yaml"])
    out, err = capsys.readouterr()
    return code, [doc for doc in yaml.safe_load_all(out) if doc], err


def test_a_repository_and_a_quantization_deploy_its_file(
    hub: HubState, capsys: pytest.CaptureFixture[str]
) -> None:
    code, (model, service), _ = deployed(capsys, f"{REPO}:Q4_K_M", "--memory", "1Gi")
    assert code == 0
    assert model["spec"] == {  # type: ignore[index]
        "source": REPO,
        "files": ["tiny-chat-Q4_K_M.gguf"],
        "quantization": "Q4_K_M",
        "hardware": {"accelerator": "cpu"},
    }
    assert service["spec"]["modelRef"] == model["metadata"]["name"] == "tiny-chat-gguf"  # type: ignore[index]
    assert [r.path for r in hub.requests] == [f"/api/models/{REPO}/revision/main"]


def test_an_unknown_quantization_says_which_exist(hub: HubState, capsys: pytest.CaptureFixture[str]) -> None:
    code, docs, err = deployed(capsys, f"hf://{REPO}:Q5_K_M")
    assert (code, docs) == (1, [])
    assert err == (f'error: the Hugging Face repository "{REPO}" has no Q5_K_M GGUF file; it has: {HAS}\n')


def test_a_repository_of_several_models_asks_which(hub: HubState, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = deployed(capsys, REPO)
    assert code == 1 and f"name one as {REPO}:QUANT" in err


def test_file_names_the_file_and_asks_the_hub_nothing(
    hub: HubState, capsys: pytest.CaptureFixture[str]
) -> None:
    code, (model, _), _ = deployed(capsys, REPO, "--file", "tiny-chat-Q8_0.gguf")
    assert code == 0 and model["spec"]["files"] == ["tiny-chat-Q8_0.gguf"]  # type: ignore[index]
    assert hub.requests == []


def test_vllm_resolves_a_repository_itself(hub: HubState, capsys: pytest.CaptureFixture[str]) -> None:
    code, (model, _), _ = deployed(capsys, REPO, "--runtime", "vllm", "--gpu", "1")
    assert code == 0 and "files" not in model["spec"]  # type: ignore[operator]
    assert hub.requests == []


def test_a_private_repository_needs_a_token(
    hub: HubState, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = deployed(capsys, "org/Private-GGUF:Q4_K_M")
    assert code == 1 and "is private or gated" in err and "set HF_TOKEN" in err
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    code, (model, _), _ = deployed(capsys, "org/Private-GGUF:Q4_K_M")
    assert code == 0 and model["spec"]["files"] == ["p-Q4_K_M.gguf"]  # type: ignore[index]


def test_a_hub_that_cannot_be_reached_is_said_with_the_way_around(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    code, _, err = deployed(capsys, f"{REPO}:Q4_K_M")
    assert code == 1
    assert err.startswith(
        f"error: cannot list the files of {REPO} on the Hugging Face Hub at http://127.0.0.1:9 ("
    )
    assert err.rstrip().endswith("name the file with --file")
