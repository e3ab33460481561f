"""`llmkube deploy org/repo[:QUANT]`: the repository's file list from the Hugging Face Hub (its own
API, `HF_ENDPOINT` and `HF_TOKEN` as the Hub's tools read them), and the file(s) to serve chosen by
plan/model/hub_files.py (the Model controller's choice too). The answer is bounded in size and time
before it is parsed."""

import argparse
import os

import aiohttp

from llmkube.apimachinery.proxy import ProxyConfig, ProxyURLError
from llmkube.plan.model.hub_files import (
    MAX_LISTING_BYTES,
    Chosen,
    Missing,
    NotChosen,
    choose_files,
    listed_files,
    listing_url,
    split_quantization,
)
from llmkube.plan.model.source import SourceKind, classify_source, parse_hf_source
from llmkube.sources import read_bounded
from llmkube.usercli.errors import UserError

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_SECONDS = 30.0
#: the runtimes that load one file (vLLM and TGI resolve a whole repository themselves)
ONE_FILE_RUNTIMES = (None, "llamacpp")


def needs_a_file(source: str, runtime: str | None, files: list[str] | None) -> bool:
    return (
        classify_source(source) in (SourceKind.HF, SourceKind.HUGGINGFACE)
        and runtime in ONE_FILE_RUNTIMES
        and not files
    )


async def repository_files(repo: str, revision: str) -> list[str]:
    endpoint = os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    url = listing_url(endpoint, repo, revision)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        proxy = ProxyConfig.from_environ(os.environ).proxy_for(url)  # HTTPS_PROXY / NO_PROXY, as kubectl
    except ProxyURLError as error:
        raise UserError(f"HTTPS_PROXY/HTTP_PROXY: {error}") from None
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)) as http,
            http.get(url, headers=headers, proxy=proxy) as response,
        ):
            if response.status in (401, 403):
                raise UserError(
                    f'the Hugging Face repository "{repo}" is private or gated ({response.status}): '
                    "set HF_TOKEN to a token that may read it, or name the file with --file"
                )
            if response.status == 404:
                raise UserError(
                    f'the Hugging Face Hub at {endpoint} has no repository "{repo}" at "{revision}"'
                )
            if response.status != 200:
                raise UserError(f"the Hugging Face Hub at {endpoint} answered {response.status} for {repo}")
            body = await read_bounded(response.content, MAX_LISTING_BYTES + 1)
    except (aiohttp.ClientError, TimeoutError) as failed:
        why = f"{failed.__class__.__name__}: {failed}" if str(failed) else failed.__class__.__name__
        raise UserError(
            f"cannot list the files of {repo} on the Hugging Face Hub at {endpoint} ({why}): "
            "name the file with --file"
        ) from None
    if len(body) > MAX_LISTING_BYTES:
        raise UserError(
            f"the file list of {repo} is larger than {MAX_LISTING_BYTES} bytes: name the file with --file"
        )
    files = listed_files(body)
    if files is None:
        raise UserError(f"the Hugging Face Hub's answer for {repo} is not its file list")
    return files


def not_chosen_message(problem: NotChosen) -> str:
    repository = problem.repository
    if problem.kind is Missing.NO_GGUF:
        return f'the Hugging Face repository "{repository}" has no GGUF model file (llama.cpp serves GGUF)'
    if problem.kind is Missing.AMBIGUOUS:
        return (
            f'the Hugging Face repository "{repository}" has {problem.models} GGUF models: name one as '
            f"{repository}:QUANT ({', '.join(problem.quantizations)}) or with --file"
        )
    return (
        f'the Hugging Face repository "{repository}" has no {problem.asked} GGUF file; it has: '
        f"{', '.join(problem.quantizations) or 'files without a quantization in their names (use --file)'}"
    )


async def resolve_model_file(args: argparse.Namespace) -> argparse.Namespace:
    """The deploy's arguments with `org/repo:QUANT` split and, for llama.cpp, the file(s) to serve
    chosen from the repository (unchanged for any other source or runtime, or with --file)."""
    named = split_quantization(args.source)
    quantization = args.quantization or named.quantization
    args = argparse.Namespace(**{**vars(args), "source": named.source, "quantization": quantization})
    if not needs_a_file(named.source, args.runtime, args.file):
        return args
    parsed = parse_hf_source(named.source)
    if isinstance(parsed, str):
        raise UserError(parsed)
    chosen = choose_files(
        parsed.repo, await repository_files(parsed.repo, parsed.revision), named.quantization
    )
    if isinstance(chosen, NotChosen):
        raise UserError(not_chosen_message(chosen))
    return _with(args, chosen)


def _with(args: argparse.Namespace, chosen: Chosen) -> argparse.Namespace:
    return argparse.Namespace(
        **{**vars(args), "file": list(chosen.files), "quantization": args.quantization or chosen.quantization}
    )
