"""Sentence embeddings: a BERT encoder with mean pooling, run with NumPy (ADR 0043).

It reads a sentence-transformers model folder, as the model's authors publish it:
`config.json` (a BERT: `model_type` "bert", absolute positions, GELU), `model.safetensors`
(the weights), `tokenizer.json` (its WordPiece tokenizer) and, when there,
`1_Pooling/config.json` (mean pooling is the only kind taken) and `sentence_bert_config.json`
(`max_seq_length`). all-MiniLM-L6-v2 is the model measured (bench/retrieval.md, "Meaning").

`encode` gives each text a unit vector; the dot product of two is their cosine similarity.
The forward pass is BERT's: embeddings, then per layer self-attention and a feed-forward
block, each followed by a residual sum and layer normalization; GELU is the exact one (erf),
as the model was trained with. Texts are run in batches of similar length, padded, with the
padding masked out of attention and of the mean. Nothing is downloaded: the folder is all.

NumPy, safetensors and tokenizers are the optional `semantic` dependencies: importing this
module without them raises `ModelError` with the command that installs them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import blake3

from ..errors import WorkspaceError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

INSTALL: Final = "uv sync --extra semantic (or pip install 'raytsystem[semantic]')"
Shape = tuple[int | None, ...]  # a weight's shape; None: any size
BATCH: Final = 8  # small batches pad short texts less: a query encodes about 20
LAYER_NORM_EPS_DEFAULT: Final = 1e-12
# Raised whenever a change here changes the vectors a model gives: stored vectors (ADR 0044)
# are named by it and the model's bytes (`SentenceEncoder.digest`).
ENCODER_VERSION: Final = 2
OPTIONAL_FILES: Final = ("sentence_bert_config.json", "1_Pooling/config.json")


class ModelError(WorkspaceError):
    """The model folder or the packages that run it are missing or not a model we can run."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="semantic_model_invalid")


def _modules() -> tuple[Any, Any, Any]:
    try:
        import numpy
        import safetensors.numpy
        import tokenizers
    except ImportError as exc:
        raise ModelError(
            f"sentence embeddings need NumPy, safetensors and tokenizers ({exc.name} is "
            f"missing): {INSTALL}"
        ) from None
    return numpy, safetensors.numpy, tokenizers


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"the model folder has no {path.name} ({path})") from None
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path} cannot be read as JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path} is not a JSON object")
    return data


class SentenceEncoder:
    """A BERT sentence encoder loaded from a model folder (see the module's docstring)."""

    def __init__(self, folder: Path) -> None:
        np_, st, tk = _modules()
        self._np = self.numpy = np_
        if not folder.is_dir():
            raise ModelError(f"no model folder at {folder}")
        config = _read_json(folder / "config.json")
        self._check(config, folder)
        self.heads = _count(config, "num_attention_heads", None, folder)
        self.layers = _count(config, "num_hidden_layers", None, folder)
        self.inner = _count(config, "intermediate_size", None, folder)
        max_len = _count(config, "max_position_embeddings", 512, folder)
        sbert = folder / "sentence_bert_config.json"
        if sbert.exists():
            max_len = min(max_len, _count(_read_json(sbert), "max_seq_length", max_len, folder))
        eps = config.get("layer_norm_eps", LAYER_NORM_EPS_DEFAULT)
        if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 < eps < 1:
            raise ModelError(f"the model in {folder} has no usable layer_norm_eps ({eps!r})")
        self.eps = float(eps)
        try:
            weights = (folder / "model.safetensors").read_bytes()
            self.w: dict[str, NDArray[np.float32]] = {
                k: v.astype(np_.float32, copy=False) for k, v in st.load(weights).items()
            }
            tokens = (folder / "tokenizer.json").read_bytes()
            self.tokenizer = tk.Tokenizer.from_str(tokens.decode("utf-8"))
            self.digest = _digest(folder, {"tokenizer.json": tokens, "model.safetensors": weights})
        except FileNotFoundError as exc:
            raise ModelError(f"the model folder {folder} lacks a file: {exc}") from None
        except Exception as exc:  # the libraries' own errors for a damaged file
            raise ModelError(f"the model in {folder} cannot be loaded: {exc}") from exc
        self._check_weights(folder)
        positions = int(self.w["embeddings.position_embeddings.weight"].shape[0])
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(min(max_len, positions))

    @staticmethod
    def _check(config: dict[str, Any], folder: Path) -> None:
        if config.get("model_type") != "bert":
            raise ModelError(f"the model in {folder} is not a BERT ({config.get('model_type')!r})")
        if (
            config.get("hidden_act", "gelu") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute"
        ):
            raise ModelError(f"the model in {folder} uses a BERT variant this encoder does not run")
        pooling = folder / "1_Pooling" / "config.json"
        if pooling.exists() and not _read_json(pooling).get("pooling_mode_mean_tokens", False):
            raise ModelError(f"the model in {folder} does not pool by mean; only that is run")

    def _check_weights(self, folder: Path) -> None:
        """Every weight `_forward` reads, of the shape the config says; no layer beyond it."""
        prefix = "" if "embeddings.word_embeddings.weight" in self.w else "bert."
        if prefix:
            self.w = {k.removeprefix(prefix): v for k, v in self.w.items()}
        words = self.w.get("embeddings.word_embeddings.weight")
        width = int(words.shape[1]) if words is not None and words.ndim == 2 else 0
        if not width or width % self.heads:
            raise ModelError(f"the model in {folder} has no word embeddings its heads divide")
        self.width = width
        square: Shape = (width, width)
        inner: Shape = (self.inner, width)
        needed: dict[str, Shape] = {
            "embeddings.position_embeddings.weight": (None, width),
            "embeddings.token_type_embeddings.weight": (None, width),
            "embeddings.LayerNorm.weight": (width,),
            "embeddings.LayerNorm.bias": (width,),
        }
        for i in range(self.layers):
            at = f"encoder.layer.{i}."
            for name, shape in [
                *((f"attention.self.{p}", square) for p in ("query", "key", "value")),
                ("attention.output.dense", square),
                ("intermediate.dense", inner),
                ("output.dense", (width, self.inner)),
            ]:
                needed[f"{at}{name}.weight"] = shape
                needed[f"{at}{name}.bias"] = shape[:1]
            for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
                needed[f"{at}{norm}.weight"] = needed[f"{at}{norm}.bias"] = (width,)
        for key, shape in needed.items():
            found = self.w.get(key)
            if (
                found is None
                or len(found.shape) != len(shape)
                or any(
                    want is not None and got != want
                    for got, want in zip(found.shape, shape, strict=True)
                )
            ):
                raise ModelError(f"the weights in {folder} lack {key} of shape {shape}")
        if any(k.startswith(f"encoder.layer.{self.layers}.") for k in self.w):
            raise ModelError(f"the weights in {folder} have more layers than its config")
        # The layers' weights transposed once, contiguous, for `_linear`.
        for key in [k for k in needed if k.startswith("encoder.") and len(needed[k]) == 2]:
            self.w[f"{key}^T"] = self._np.ascontiguousarray(self.w[key].T)

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One unit vector per text (rows, in the texts' order)."""
        np_ = self._np
        out: NDArray[np.float32] = np_.zeros((len(texts), self.width), np_.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: (len(encodings[i].ids), i))
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np_.zeros((len(rows), width), np_.int64)
            mask = np_.zeros((len(rows), width), np_.float32)
            for r, i in enumerate(rows):
                found = encodings[i].ids
                ids[r, : len(found)] = found
                mask[r, : len(found)] = 1.0
            out[rows] = self._forward(ids, mask)
        return out

    def _norm(self, x: NDArray[np.float32], name: str) -> NDArray[np.float32]:
        mean = x.mean(-1, keepdims=True)
        centred = x - mean
        var = (centred * centred).mean(-1, keepdims=True)
        result: NDArray[np.float32] = centred / self._np.sqrt(var + self.eps)
        return result * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]

    def _linear(self, x: NDArray[np.float32], name: str) -> NDArray[np.float32]:
        """x W^T + b, as one matrix product over every token of the batch."""
        weight = self.w[f"{name}.weight^T"]
        flat: NDArray[np.float32] = x.reshape(-1, x.shape[-1]) @ weight
        flat += self.w[f"{name}.bias"]
        result: NDArray[np.float32] = flat.reshape(*x.shape[:-1], weight.shape[1])
        return result

    def _forward(self, ids: NDArray[np.int64], mask: NDArray[np.float32]) -> NDArray[np.float32]:
        np_, w = self._np, self.w
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        head = self.width // self.heads
        masked = (mask[:, None, None, :] - np_.float32(1.0)) * np_.float32(1e9)
        scale = np_.float32(1.0 / math.sqrt(head))

        def split(t: NDArray[np.float32]) -> NDArray[np.float32]:
            return t.reshape(batch, length, self.heads, head).transpose(0, 2, 1, 3)

        for i in range(self.layers):
            at = f"encoder.layer.{i}."
            q = split(self._linear(x, at + "attention.self.query"))
            k = split(self._linear(x, at + "attention.self.key"))
            v = split(self._linear(x, at + "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + masked
            scores = np_.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, self.width)
            x = self._norm(
                self._linear(context, at + "attention.output.dense") + x,
                at + "attention.output.LayerNorm",
            )
            inner = gelu(np_, self._linear(x, at + "intermediate.dense"))
            x = self._norm(self._linear(inner, at + "output.dense") + x, at + "output.LayerNorm")
        summed = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        pooled: NDArray[np.float32] = summed / np_.linalg.norm(summed, axis=1, keepdims=True)
        return pooled


def _digest(folder: Path, read: dict[str, bytes]) -> str:
    """What names the vectors this model gives (ADR 0044): BLAKE3 over this encoder's version
    and the bytes of every file of the folder that it reads (`read`: those read already)."""
    hasher = blake3.blake3(f"raytsystem-encoder-{ENCODER_VERSION}\n".encode())
    for name in ("config.json", "tokenizer.json", *OPTIONAL_FILES, "model.safetensors"):
        path = folder / name
        if name in OPTIONAL_FILES and not path.exists():
            hasher.update(f"{name}: none\n".encode())
            continue
        data = read[name] if name in read else path.read_bytes()
        hasher.update(f"{name}: {len(data)}\n".encode())
        hasher.update(data)
    return hasher.hexdigest()


def _count(config: dict[str, Any], key: str, default: int | None, folder: Path) -> int:
    """A positive whole number of a model's config (`default` when absent, if any)."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelError(f"the model in {folder} has no usable {key} ({value!r})")
    return value


def gelu(np_: Any, x: NDArray[np.float32]) -> NDArray[np.float32]:
    """x * Phi(x), Phi the normal CDF through erf, as max(x, 0) - |x| erfc(|x| / sqrt 2) / 2
    (NumPy has no erf: Abramowitz and Stegun's 7.1.26, absolute error below 1.5e-7). Every
    step is in place: this is the one element-wise pass over the widest activations, and
    temporaries cost more than the arithmetic."""
    f32 = np_.float32
    a = np_.abs(x)
    t = a * f32(_AS_P / math.sqrt(2.0))
    t += f32(1.0)
    np_.reciprocal(t, out=t)
    poly = t * f32(_AS_A[-1])
    for c in reversed(_AS_A[:-1]):
        poly += f32(c)
        poly *= t
    square = a * a
    square *= f32(-0.5)
    np_.exp(square, out=square)
    poly *= square  # erfc(|x| / sqrt 2)
    poly *= a
    poly *= f32(0.5)
    result: NDArray[np.float32] = np_.maximum(x, f32(0.0))
    result -= poly
    return result


_AS_P: Final = 0.3275911
_AS_A: Final = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
