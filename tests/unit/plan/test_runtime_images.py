"""`--runtime-images`: which keys exist and how a value is read (plan/inferenceservice/images.py)."""

import pytest

from llmkube.plan.inferenceservice.images import (
    DEFAULT_RUNTIME_IMAGES,
    RuntimeImagesError,
    parse_runtime_images,
)


@pytest.mark.parametrize(
    ("text", "images"),
    [
        ("", {}),
        (" , ", {}),
        ("llamacpp=m/cpu:1", {"llamacpp": "m/cpu:1"}),
        (
            "llamacpp-cuda=reg.local:5000/llama.cpp:server-cuda-b1, vllm = m/vllm@sha256:" + "a" * 64,
            {"llamacpp-cuda": "reg.local:5000/llama.cpp:server-cuda-b1", "vllm": "m/vllm@sha256:" + "a" * 64},
        ),
    ],
)
def test_parse(text: str, images: dict[str, str]) -> None:
    assert parse_runtime_images(text) == images


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("llama=m:1", 'unknown key "llama": use one of llamacpp, llamacpp-cuda'),
        ("generic=m:1", 'unknown key "generic"'),
        ("llamacpp", '"llamacpp" must be llamacpp=IMAGE'),
        ("llamacpp=", '"llamacpp=" must be llamacpp=IMAGE'),
        ("tgi=a b", '"tgi=a b" must be tgi=IMAGE'),
    ],
)
def test_a_bad_value_names_the_key(text: str, message: str) -> None:
    with pytest.raises(RuntimeImagesError, match=message):
        parse_runtime_images(text)


def test_no_default_floats() -> None:
    for key, image in DEFAULT_RUNTIME_IMAGES.items():
        _, _, tag = image.rpartition("/")[2].partition(":")
        assert tag and tag != "latest" and not tag.startswith("server-cuda13"), (key, image)
