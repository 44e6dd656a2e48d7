"""PyTorch twins of kolo's trainer models (plain torch.nn, Hugging Face parameter names) and a
reader for kolo's safetensors files (json + torch.frombuffer, no safetensors package).

Imported by compare.py; `/usr/bin/python3 kolo_torch.py --bench` times BERT fwd+bwd of the
same shape written as a PyTorch user would (IdiomaticBertMlm: the torch side of kolo's
throughput comparison, benchmarks/trainer_throughput).
"""
import argparse
import contextlib
import json
import math
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
           "F64": torch.float64, "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8,
           "I8": torch.int8, "I16": torch.int16}


def read_safetensors(path):
    """Returns ({name: tensor}, {metadata}) of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = bytearray(blob[8 + n:])
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        dt = _DTYPES[e["dtype"]]
        if end == begin:
            t = torch.zeros(0, dtype=dt)
        else:
            t = torch.frombuffer(data, dtype=dt, count=(end - begin) // _elem(dt), offset=begin)
        out[name] = t.clone().reshape(e["shape"])
    return out, meta


def _elem(dt):
    return torch.tensor([], dtype=dt).element_size()


# ----------------------------------------------------------------------------- BERT
PRESETS = {"tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8),
           "medium": (8, 512, 8), "base": (12, 768, 12), "large": (24, 1024, 16)}


def bert_config(preset="tiny", **overrides):
    layers, hidden, heads = PRESETS[preset]
    c = dict(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
             num_attention_heads=heads, intermediate_size=4 * hidden,
             max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12,
             hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, num_labels=0,
             mlm_head=True)
    c.update(overrides)
    return c


class _Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        H = c["hidden_size"]
        self.word_embeddings = nn.Embedding(c["vocab_size"], H)
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], H)
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], H)
        self.LayerNorm = nn.LayerNorm(H, eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(self, ids, types):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.word_embeddings(ids) + self.position_embeddings(pos)[None] + \
            self.token_type_embeddings(types)
        return self.dropout(self.LayerNorm(x))


class _SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.query, self.key, self.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.dropout = nn.Dropout(c["attention_probs_dropout_prob"])

    def forward(self, x, bias):
        B, S, H = x.shape
        split = lambda t: t.view(B, S, self.heads, H // self.heads).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(H // self.heads) + bias
        probs = self.dropout(scores.softmax(-1))
        return (probs @ v).transpose(1, 2).reshape(B, S, H)


class _DenseNorm(nn.Module):
    """dense -> dropout -> + residual -> LayerNorm (BertSelfOutput / BertOutput)."""

    def __init__(self, c, d_in):
        super().__init__()
        self.dense = nn.Linear(d_in, c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class _Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        setattr(self, "self", _SelfAttention(c))  # Hugging Face's name
        self.output = _DenseNorm(c, c["hidden_size"])

    def forward(self, x, bias):
        return self.output(getattr(self, "self")(x, bias), x)


class _Intermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])

    def forward(self, x):
        return F.gelu(self.dense(x))


class _Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = _Attention(c)
        self.intermediate = _Intermediate(c)
        self.output = _DenseNorm(c, c["intermediate_size"])

    def forward(self, x, bias):
        a = self.attention(x, bias)
        return self.output(self.intermediate(a), a)


class _Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([_Layer(c) for _ in range(c["num_hidden_layers"])])


class _Pooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])


class _BertBody(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = _Embeddings(c)
        self.encoder = _Encoder(c)
        if c["num_labels"] > 0:
            self.pooler = _Pooler(c)

    def forward(self, ids, types, mask):
        # Padded keys get the most negative float, as Hugging Face's extended attention mask.
        bias = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        x = self.embeddings(ids, types)
        for layer in self.encoder.layer:
            x = layer(x, bias.to(x.dtype))
        return x


class _Transform(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])


class _Predictions(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transform = _Transform(c)
        self.bias = nn.Parameter(torch.zeros(c["vocab_size"]))


class _MlmHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.predictions = _Predictions(c)


class Bert(nn.Module):
    """BERT with an MLM head (decoder tied to the word embeddings) and/or a classifier."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.bert = _BertBody(c)
        if c.get("mlm_head", True):
            self.cls = _MlmHead(c)
        if c["num_labels"] > 0:
            self.classifier = nn.Linear(c["hidden_size"], c["num_labels"])
            self.cls_dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(self, input_ids, token_type_ids, attention_mask, mlm_labels=None, labels=None):
        """Returns (loss, mlm_loss, cls_loss); the MLM head runs on the labelled rows only."""
        h = self.bert(input_ids.long(), token_type_ids.long(), attention_mask)
        mlm_loss = cls_loss = torch.zeros((), dtype=h.dtype)
        if mlm_labels is not None and hasattr(self, "cls"):
            flat = mlm_labels.reshape(-1).long()
            rows = (flat != -100).nonzero().squeeze(1)
            p = self.cls.predictions
            t = p.transform.LayerNorm(F.gelu(p.transform.dense(h.reshape(-1, h.shape[-1])[rows])))
            logits = t @ self.bert.embeddings.word_embeddings.weight.t() + p.bias
            mlm_loss = F.cross_entropy(logits.float(), flat[rows])
        if labels is not None and hasattr(self, "classifier"):
            pooled = torch.tanh(self.bert.pooler.dense(h[:, 0]))
            logits = self.classifier(self.cls_dropout(pooled))
            cls_loss = F.cross_entropy(logits.float(), labels.long())
        return mlm_loss + cls_loss, mlm_loss, cls_loss


# ----------------------------------------------------------------------------- MLP
class Mlp(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])])

    def forward(self, x, labels):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return F.cross_entropy(x.float(), labels.long())


def load_weights(model, tensors, dtype=torch.float32):
    """Copies kolo's tensors into `model` by name; every parameter must be present."""
    params = dict(model.named_parameters())
    missing = sorted(set(params) - set(tensors))
    unexpected = sorted(set(tensors) - set(params))
    if missing or unexpected:
        raise ValueError(f"name mismatch: missing {missing}, unexpected {unexpected}")
    with torch.no_grad():
        for name, p in params.items():
            if tuple(p.shape) != tuple(tensors[name].shape):
                raise ValueError(f"{name}: shape {tuple(tensors[name].shape)} vs {tuple(p.shape)}")
            p.copy_(tensors[name].to(dtype))


# ----------------------------------------------------------------------------- benchmark
class IdiomaticBertMlm(nn.Module):
    """The benchmark's torch side: BERT with an MLM head as a PyTorch user writes it, the same
    shape as kolo's (post-LN encoder layers with exact GELU, a fused qkv projection inside
    nn.MultiheadAttention, the decoder tied to the word embeddings, the head on the labelled
    rows only) and Hugging Face's initialisation (normal, std 0.02; torch's default N(0, 1)
    embeddings would make the logits' gradients denormal and time the CPU's slow path)."""

    def __init__(self, c):
        super().__init__()
        H, eps = c["hidden_size"], c["layer_norm_eps"]
        self.word = nn.Embedding(c["vocab_size"], H)
        self.position = nn.Embedding(c["max_position_embeddings"], H)
        self.token_type = nn.Embedding(c["type_vocab_size"], H)
        self.norm = nn.LayerNorm(H, eps=eps)
        self.dropout = nn.Dropout(c["hidden_dropout_prob"])
        layer = nn.TransformerEncoderLayer(H, c["num_attention_heads"], c["intermediate_size"],
                                           dropout=c["hidden_dropout_prob"], activation="gelu",
                                           layer_norm_eps=eps, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, c["num_hidden_layers"],
                                             enable_nested_tensor=False)
        self.transform = nn.Linear(H, H)
        self.transform_norm = nn.LayerNorm(H, eps=eps)
        self.decoder = nn.Linear(H, c["vocab_size"])
        self.decoder.weight = self.word.weight
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
        if isinstance(m, nn.MultiheadAttention):
            nn.init.normal_(m.in_proj_weight, std=0.02)
            nn.init.zeros_(m.in_proj_bias)

    def forward(self, ids, types, mask, labels):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.word(ids) + self.position(positions) + self.token_type(types)
        x = self.encoder(self.dropout(self.norm(x)), src_key_padding_mask=mask == 0)
        rows = labels.reshape(-1) != -100
        h = x.reshape(-1, x.shape[-1])[rows]
        logits = self.decoder(self.transform_norm(F.gelu(self.transform(h))))
        return F.cross_entropy(logits, labels.reshape(-1)[rows])


def bench(preset, batch, seq, steps, threads, dropout=0.0, mask_fraction=0.15, device="cpu",
          dtype="float32", amp=False):
    """fwd+bwd tokens/s of IdiomaticBertMlm, the MLM head on the masked rows only (as kolo).
    On a GPU the model is stored in `dtype` as kolo's is, or with `amp` kept in fp32 and run
    under torch.autocast(dtype), the usual mixed-precision recipe."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    dev = torch.device(device)
    dt = getattr(torch, dtype)
    c = bert_config(preset, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    model = IdiomaticBertMlm(c).to(dev)
    if not amp:
        model = model.to(dt)
    ids = torch.randint(0, c["vocab_size"], (batch, seq))
    types = torch.zeros_like(ids)
    mask = torch.ones_like(ids)
    labels = torch.full_like(ids, -100)
    chosen = torch.rand(batch, seq) < mask_fraction
    labels[chosen] = ids[chosen]
    ids, types, mask, labels = (t.to(dev) for t in (ids, types, mask, labels))
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times = []
    for step in range(steps + 2):  # two warm-up steps
        sync()
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=False)
        with torch.autocast(device_type=dev.type, dtype=dt) if amp else contextlib.nullcontext():
            loss = model(ids, types, mask, labels)
        loss.backward()
        sync()
        times.append(time.perf_counter() - t0)
    best = min(times[2:])
    median = sorted(times[2:])[len(times[2:]) // 2]
    where = "" if dev.type == "cpu" else f"{device} {dtype}{' autocast' if amp else ''} "
    print(f"torch {torch.__version__} bert-{preset} (nn.TransformerEncoder) {where}batch {batch} "
          f"seq {seq} threads {threads}: median {median * 1e3:.1f} ms/step, "
          f"{batch * seq / median:.0f} tokens/s (best {batch * seq / best:.0f})")
    return batch * seq / median


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bench", action="store_true", help="time BERT fwd+bwd")
    ap.add_argument("--preset", default="mini")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dropout", type=float, default=0.0, help="hidden and attention dropout")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"],
                    help="the model's storage dtype (with --amp: autocast's)")
    ap.add_argument("--amp", action="store_true", help="fp32 model under torch.autocast(--dtype)")
    args = ap.parse_args()
    if not args.bench:
        ap.print_help()
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"kolo_torch.py: --device cuda: torch {torch.__version__} sees no CUDA device",
              file=sys.stderr)
        return 2
    bench(args.preset, args.batch, args.seq, args.steps, args.threads, args.dropout,
          device=args.device, dtype=args.dtype, amp=args.amp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
