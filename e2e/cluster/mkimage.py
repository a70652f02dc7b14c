#!/usr/bin/env python3
"""Writes a one-layer container image of static files as a docker-archive (what `docker save`
writes and `ctr images import` reads), without podman or a registry: the test cluster's own
add-ons (CoreDNS) are single static Go programs, so an image is a tar of them plus a config.

  mkimage.py --name docker.io/tidegate/coredns:test --add /path/coredns:/coredns \
             --entrypoint /coredns --out coredns.tar

The archive is reproducible: the same inputs give the same bytes (fixed mtimes, sorted entries).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tarfile
from pathlib import Path


def _add_file(tar: tarfile.TarFile, src: Path, dest: str, seen_dirs: set[str]) -> None:
    parts = dest.strip("/").split("/")
    for i in range(1, len(parts)):
        d = "/".join(parts[:i])
        if d not in seen_dirs:
            seen_dirs.add(d)
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
    data = src.read_bytes()
    info = tarfile.TarInfo("/".join(parts))
    info.size, info.mtime = len(data), 0
    info.mode = 0o755 if src.stat().st_mode & 0o111 else 0o644
    tar.addfile(info, io.BytesIO(data))


def build_layer(files: list[tuple[Path, str]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        seen: set[str] = set()
        for src, dest in sorted(files, key=lambda f: f[1]):
            _add_file(tar, src, dest, seen)
    return buf.getvalue()


def write_archive(name: str, files: list[tuple[Path, str]], entrypoint: list[str],
                  env: list[str], out: Path, user: str = "") -> None:
    layer = build_layer(files)
    layer_digest = hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": {"Entrypoint": entrypoint, "Env": env, **({"User": user} if user else {})},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "e2e/cluster/mkimage.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [name],
                 "Layers": [f"{layer_digest}/layer.tar"]}]
    tmp = out.with_suffix(out.suffix + ".tmp")
    with tarfile.open(tmp, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for arcname, data in ((f"{layer_digest}/layer.tar", layer),
                              (config_name, config_bytes),
                              ("manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(arcname)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--name", required=True, help="full image name, e.g. docker.io/x/y:tag")
    ap.add_argument("--add", action="append", default=[], help="SRC:DEST, repeatable")
    ap.add_argument("--entrypoint", required=True, help="program and arguments, space-separated")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE, repeatable")
    ap.add_argument("--user", default="", help="numeric uid[:gid] to run as")
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args()
    files = []
    for spec in a.add:
        src, _, dest = spec.partition(":")
        if not dest:
            ap.error(f"--add {spec}: expected SRC:DEST")
        files.append((Path(src), dest))
    write_archive(a.name, files, a.entrypoint.split(), a.env, a.out, a.user)


if __name__ == "__main__":
    main()
