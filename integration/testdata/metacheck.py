"""Walks a volfs mount and fails on metadata that describes other bytes.

    python3 metacheck.py MOUNT

A directory where volfs rewrote metadata (it shows a "NAME.orig" beside,
or instead of, NAME) serves decoded chunk files: every metadata file left
in it must name no codec over them. Zarr v2 ".zarray": no compressor, no
filters. Zarr v3 "zarr.json" of an array: codecs bytes and transpose only.
N5 "attributes.json" of a dataset: compression raw. Precomputed "info":
every scale raw, unsharded. Consolidated metadata (".zmetadata", a v3
group's "consolidated_metadata") is checked the same way for each array
whose own directory volfs rewrote, wherever the consolidated file is.
Directories volfs passes through undecoded are not checked: their
metadata describes their objects, as stored.

Prints one line per violation and exits 1 if there is any; otherwise
prints how many metadata files and entries it checked.
"""

import json
import os
import sys

META = (".zarray", "zarr.json", ".zmetadata", "attributes.json", "info")


def v2_codecs(m):
    out = []
    if m.get("compressor") is not None:
        out.append(m["compressor"].get("id", "?"))
    out += [f.get("id", "?") for f in (m.get("filters") or [])]
    return out


def v3_codecs(m):
    names = []
    for c in m.get("codecs") or []:
        names.append(c if isinstance(c, str) else c.get("name", "?"))
    return [n for n in names if n not in ("bytes", "transpose")]


def load(p):
    with open(p, "rb") as f:
        return json.loads(f.read())


def rewritten(mount, key, name):
    """Whether volfs rewrote metadata NAME of the directory at key."""
    return os.path.exists(os.path.join(mount, key, name + ".orig"))


def main(mount):
    bad, checked = [], 0

    def fail(where, what):
        bad.append(f"{os.path.relpath(where, mount)}: {what}")

    for dirpath, dirnames, filenames in os.walk(mount):
        names = set(filenames)
        decoded = any(n.endswith(".orig") for n in names)
        for name in META:
            if name not in names:
                continue
            p = os.path.join(dirpath, name)
            try:
                m = load(p)
            except (ValueError, UnicodeDecodeError):
                continue  # not JSON: not metadata of these formats
            if not isinstance(m, dict):
                continue
            rel = os.path.relpath(dirpath, mount)
            if name == ".zmetadata":
                for k, v in (m.get("metadata") or {}).items():
                    if k.endswith(".zarray") and rewritten(mount, os.path.join(rel, os.path.dirname(k)), ".zarray"):
                        checked += 1
                        if v2_codecs(v):
                            fail(p, f"entry {k} names {v2_codecs(v)} over decoded chunks")
                continue
            if name == "zarr.json" and m.get("node_type") == "group":
                for k, v in ((m.get("consolidated_metadata") or {}).get("metadata") or {}).items():
                    if v.get("node_type") == "array" and rewritten(mount, os.path.join(rel, k), "zarr.json"):
                        checked += 1
                        if v3_codecs(v):
                            fail(p, f"consolidated entry {k} names {v3_codecs(v)} over decoded chunks")
                continue
            if not decoded:
                continue
            checked += 1
            if name == ".zarray" and v2_codecs(m):
                fail(p, f"names {v2_codecs(m)} over decoded chunks")
            elif name == "zarr.json" and m.get("node_type") == "array" and v3_codecs(m):
                fail(p, f"names {v3_codecs(m)} over decoded chunks")
            elif name == "attributes.json" and "dimensions" in m:
                comp = m.get("compression") or {"type": m.get("compressionType", "raw")}
                if comp.get("type", "raw") != "raw":
                    fail(p, f"compression {comp} over decoded chunks")
            elif name == "info" and "scales" in m:
                for s in m.get("scales") or []:
                    if s.get("encoding") != "raw" or s.get("sharding"):
                        fail(p, f"scale {s.get('key')}: encoding {s.get('encoding')}, sharding {s.get('sharding')}")
    for line in bad:
        print(line)
    print(f"{checked} metadata files and entries checked, {len(bad)} describe other bytes")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(sys.argv[1])
