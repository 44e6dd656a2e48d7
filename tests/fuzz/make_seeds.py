#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs into tests/fuzz/seeds/<target>/: small valid messages
in each format, so that fuzzing starts past the first checks. Rerun after a format changes:
  python3 tests/fuzz/make_seeds.py
The formats are those of comm/bootstrap/store_protocol.h, comm/net/auth.h, fusion/wire.cc,
trainer/io/safetensors.h and a checkpoint's index.json (trainer/checkpoint/index_check.h); each seed starts with the byte that picks the target's mode."""
import hashlib
import hmac
import json
import os
import shutil
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(ROOT, "seeds")


def write(target, name, data):
    folder = os.path.join(SEEDS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def store_frame(cmd, key, value):
    return struct.pack("<BIQ", cmd, len(key), len(value)) + key + value


def store_seeds():
    frames = (store_frame(1, b"rank/0", b"127.0.0.1:29500") + store_frame(2, b"rank/0", b"") +
              store_frame(3, b"barrier", struct.pack("<q", 1)) + store_frame(2, b"missing", b""))
    write("fuzz_store_protocol", "set_get_add", b"\x00" + frames)
    write("fuzz_store_protocol", "set_get_add_in_7_byte_reads", b"\x07" + frames)


# The handshake (comm/net/auth.h), under the target's fixed challenge and secret.
PROTOCOL_VERSION = 2
SECRET = b"fuzz-secret"
NONCE = b"\x5a" * 32  # the challenge's nonce in fuzz_handshake.cc


def hello(role, rank, tag):
    body = b"KOLH" + struct.pack("<IIi", PROTOCOL_VERSION, role, rank) + tag.ljust(64, b"\0")
    body += bytes(range(32))  # the connector's nonce
    return body + hmac.new(SECRET, NONCE + body, hashlib.sha256).digest()


def handshake_seeds():
    write("fuzz_handshake", "valid_hello", b"\x00" + hello(1, 3, b"store"))
    write("fuzz_handshake", "bad_magic", b"\x00" + b"KOLX" + hello(1, 3, b"store")[4:])
    # Mode 1: role, rank, tag length, tag, then (position, xor) pairs.
    write("fuzz_handshake", "made_hello", b"\x01" + struct.pack("<Ii", 2, 5) + b"\x04" + b"tcp0")
    write("fuzz_handshake", "made_hello_flipped",
          b"\x01" + struct.pack("<Ii", 1, 0) + b"\x05" + b"store" + b"\x10\x01")


def text(s):
    return struct.pack("<I", len(s)) + s


def ints(v):
    return struct.pack("<I", len(v)) + b"".join(struct.pack("<q", x) for x in v)


# name, type, dtype, shape, op, prescale, postscale, compression, root, splits, group, size
def request(name, op_type=0, dtype=0, shape=(4, 2), op=0, group=b"", group_size=0):
    return (text(name) + struct.pack("<BB", op_type, dtype) + ints(shape) +
            struct.pack("<BddBi", op, 1.0, 0.5, 0, 0) + ints([]) + text(group) +
            struct.pack("<i", group_size))


def wire_seeds():
    reqs = [request(b"grad.w"), request(b"grad.b", dtype=2, shape=(8,), group=b"grad.w",
                                        group_size=2), request(b"x", op_type=3, dtype=5)]
    write("fuzz_engine_wire", "requests", b"\x00" + b"\x00" + struct.pack("<I", 3) +
          b"".join(reqs))
    # kind, type, names, error, first_dims, splits, joined, last_joined, params, counts
    resp = (struct.pack("<BB", 0, 0) + struct.pack("<I", 2) + text(b"grad.w") + text(b"grad.b") +
            text(b"") + ints([1, 2]) + ints([]) + ints([1]) + struct.pack("<q", -1) +
            request(b"grad.w") + ints([8, 8]))
    error = (struct.pack("<BB", 1, 1) + struct.pack("<I", 1) + text(b"t") +
             text(b"dtype differs") + ints([]) + ints([]) + ints([]) + struct.pack("<q", -1) +
             request(b"t", op_type=1) + ints([4]))
    write("fuzz_engine_wire", "responses", b"\x01" + struct.pack("<I", 2) + resp + error)


def safetensors_seeds():
    header = {"__metadata__": {"format": "pt"},
              "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
              "b": {"dtype": "BF16", "shape": [2], "data_offsets": [16, 20]}}
    text_ = json.dumps(header, separators=(",", ":"))
    text_ += " " * ((8 - len(text_) % 8) % 8)
    write("fuzz_safetensors", "two_tensors",
          struct.pack("<Q", len(text_)) + text_.encode() + bytes(range(20)))


def config_seeds():
    configs = os.path.join(ROOT, "..", "..", "examples", "configs")
    for name in sorted(os.listdir(configs)):
        if name.endswith(".json"):
            shutil.copy(os.path.join(configs, name), os.path.join(SEEDS, "fuzz_config", name))
    write("fuzz_config", "overrides",
          '{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}\n'
          '--set optimizer.type=SGD\n--set optimizer.params.momentum=0.9\n'
          '--set scheduler={"type": "WarmupDecayLR", "params": {"total_num_steps": 100}}\n'
          '--set kolo.model=784-10')


MAIL = """From spammer@example.com  Thu Aug 22 12:36:23 2002
Return-Path: <spammer@example.com>
From: =?iso-8859-1?Q?Caf=E9_Deals?= <deals@example.com>
Subject: =?utf-8?B?RnJlZSBvZmZlcg==?= for you
 (folded line)
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="----=_NextPart_000"
Content-Transfer-Encoding: quoted-printable

------=_NextPart_000
Content-Type: text/html; charset=iso-8859-1

<html><head><style>p {color: red}</style></head><body>
<p>Caf=E9 &amp; more &#233; &#x263A; !!!!!!!!!! =
soft break</p><script>alert(1)</script><br>
<a href=3D"http://example.com">click</a></body></html>
------=_NextPart_000
Content-Type: image/gif
Content-Transfer-Encoding: base64

R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7R0lGODlhAQABAIAAAAAAAP
------=_NextPart_000--
"""


def mail_seeds():
    write("fuzz_mail", "html_qp_mail", MAIL)
    write("fuzz_mail", "base64_text_mail",
          "Subject: hi\nContent-Type: text/plain\nContent-Transfer-Encoding: base64\n\n"
          "SGVsbG8sIHdvcmxkIQo=\n")


def checkpoint_index_seeds():
    sha = "a" * 64
    index = {
        "format": "kolo-checkpoint", "format_version": 1, "kolo_version": "0.1.0",
        "phase": "pretrain", "step": 6, "global_step": 6, "epoch": 0, "step_in_epoch": 6,
        "global_sample": 96, "world_size": 2, "stage": 2, "dtype": "float16",
        "optimizer": "AdamW", "optimizer_step": 6, "buffers": ["master", "exp_avg", "exp_avg_sq"],
        "loss_scaler": {"scale": 65536.0, "clean_steps": 6, "hysteresis_left": 2,
                        "skipped_steps": 0},
        "total": 40,
        "layout": [{"name": "a", "shape": [2, 5], "offset": 0, "numel": 10},
                   {"name": "b", "shape": [24], "offset": 16, "numel": 24}],
        "files": {"model.safetensors": {"sha256": sha, "bytes": 200},
                  "rank-00000-of-00002.safetensors":
                      {"sha256": sha, "bytes": 300, "rank": 0, "begin": 0, "end": 20},
                  "rank-00001-of-00002.safetensors":
                      {"sha256": sha, "bytes": 300, "rank": 1, "begin": 20, "end": 40}},
        "config": {"train_batch_size": 4}}
    write("fuzz_checkpoint_index", "two_shards", json.dumps(index, indent=1))


if __name__ == "__main__":
    os.makedirs(os.path.join(SEEDS, "fuzz_config"), exist_ok=True)
    store_seeds()
    handshake_seeds()
    wire_seeds()
    safetensors_seeds()
    config_seeds()
    mail_seeds()
    checkpoint_index_seeds()
