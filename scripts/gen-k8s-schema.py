#!/usr/bin/env python3
"""Writes proto/k8s/: the Kubernetes API's protobuf schema, as .proto files with each field's
JSON name, for the server's protobuf <-> JSON conversion (src/server/proto_json.rs).

Nothing here is copied from upstream .proto files. The schema is read from two dependencies
of this crate, as the cargo registry holds them:
- k8s-pb (prost types): message names, field numbers, scalar and message types, labels;
- k8s-openapi (serde types): each field's JSON name (k8s-pb's Rust names lost the case of
  names such as `podIPs` or `hostIPC`).
A field k8s-openapi does not know (a version skew between the two crates) gets the lower camel
case of its Rust name, and is listed on stderr.

Usage: scripts/gen-k8s-schema.py [CARGO_REGISTRY_SRC_DIR]   (run again after bumping k8s-pb
or k8s-openapi; the output is committed).
"""

import glob
import os
import re
import sys

OPENAPI_VERSION = "v1_37"
# k8s-pb top-level trees that hold API objects (metrics, the aggregator and upstream's test
# group are left out).
ROOTS = ["api", "apimachinery", "apiextensions_apiserver"]
SKIP = {("apimachinery", "pkg", "apis", "testapigroup", "v1")}


def find_crate(registry, name):
    hits = sorted(glob.glob(os.path.join(registry, "*", name + "-*")))
    if not hits:
        sys.exit(f"{name} not found under {registry} (run cargo fetch first)")
    return hits[-1]


def norm(rust_name):
    n = rust_name[2:] if rust_name.startswith("r#") else rust_name
    return n.strip("_").replace("_", "").lower()


def camel(rust_name):
    n = rust_name[2:] if rust_name.startswith("r#") else rust_name
    parts = n.strip("_").split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def openapi_names(openapi_src):
    """(module path, struct) -> {normalized rust field: JSON name}."""
    names = {}
    base = os.path.join(openapi_src, "src", OPENAPI_VERSION)
    for path in glob.glob(os.path.join(base, "**", "*.rs"), recursive=True):
        rel = os.path.relpath(os.path.dirname(path), base)
        module = tuple(rel.split(os.sep))
        text = open(path, encoding="utf-8").read()
        for m in re.finditer(r"pub struct (\w+)", text):
            struct = m.group(1)
            fields = {}
            for f in re.finditer(r'"([^"]+)" => Field::Key_(\w+),', text):
                fields[norm(f.group(2))] = f.group(1)
            # Fields k8s-openapi does not wrap in Option: upstream writes them without
            # `omitempty` (an empty string is kept in JSON).
            for f in re.finditer(r"^    pub (\w+): (?!Option<)", text, re.M):
                REQUIRED.add((module, struct.lower(), norm(f.group(1))))
            if fields:
                names.setdefault((module, struct.lower()), fields)
    return names


REQUIRED = set()


def global_names(names):
    """normalized rust field -> JSON name, where every struct that has it agrees."""
    seen = {}
    for fields in names.values():
        for k, v in fields.items():
            seen.setdefault(k, set()).add(v)
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


FIELD_RE = re.compile(r"#\[prost\(([^)]*)\)\]\s*pub (r#\w+|\w+):\s*([^;{}]*?),\s*(?=(?:///|#\[|pub |\}))", re.S)


def resolve(type_path, module):
    """A Rust type path as seen from `module` -> a proto full name."""
    t = re.sub(r"\s+", "", type_path)
    for wrap in ("::core::option::Option<", "::prost::alloc::vec::Vec<", "::prost::alloc::boxed::Box<"):
        while t.startswith(wrap):
            t = t[len(wrap):-1].rstrip(",")
    segs = t.split("::")
    cur = list(module)
    while segs and segs[0] == "super":
        cur.pop()
        segs.pop(0)
    if len(segs) == 1:
        return ".k8s." + ".".join(module + (segs[0],))
    return ".k8s." + ".".join(cur + segs)


def map_value(type_path, module):
    t = re.sub(r"\s+", "", type_path)
    inner = t[t.index("<") + 1 : t.rindex(">")]
    value = inner.split(",", 1)[1].rstrip(",")
    return resolve(value, module)


INLINE = "..inline"


def parse_module(text, module, json_names, everywhere, fallbacks, inline_candidates):
    """[(message, [field lines])] of one k8s-pb module."""
    messages = []
    for m in re.finditer(r"::prost::Message\)\]\s*pub struct (\w+) \{(?:\}|(.*?)\n\})", text, re.S):
        name, body = m.group(1), m.group(2) or ""
        known = json_names.get((module, name.lower()), {})
        fields = []
        for f in FIELD_RE.finditer(body + "\n}"):
            attrs, rust, ty = f.group(1), f.group(2), f.group(3)
            tag = re.search(r'tag = "(\d+)"', attrs).group(1)
            ident = norm(rust) or rust
            json = known.get(norm(rust))
            if json is None and known and attrs.startswith("message, optional"):
                # Go's embedded structs (`json:",inline"`): k8s-openapi flattens their fields
                # into the outer struct; protobuf keeps a nested message. Decided once every
                # message is read (the embedded one's fields must all be the outer's).
                json = INLINE
                inline_candidates.append((module, name, rust, resolve(ty, module), known))
            if json is None:
                json = everywhere.get(norm(rust)) or camel(rust)
                fallbacks.append(f"{'.'.join(module)}.{name}.{rust} -> {json}")
            opt = f' [json_name = "{json}"]'
            kind = attrs.split(",")[0].strip()
            label = "repeated" if "repeated" in attrs else "optional"
            if kind.startswith("btree_map"):
                k, v = re.search(r'"(\w+), (\w+)"', attrs).groups()
                vt = map_value(ty, module) if v == "message" else v
                fields.append(f"  map<{k}, {vt}> {ident} = {tag}{opt};")
            elif kind == "message":
                fields.append(f"  {label} {resolve(ty, module)} {ident} = {tag}{opt};")
            elif kind.startswith("bytes"):
                fields.append(f"  {label} bytes {ident} = {tag}{opt};")
            else:
                if kind == "string" and label == "optional" and (module, name.lower(), norm(rust)) in REQUIRED:
                    label = "required"
                fields.append(f"  {label} {kind} {ident} = {tag}{opt};")
        messages.append((name, fields))
    return messages


def main():
    registry = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cargo/registry/src")
    pb = find_crate(registry, "k8s-pb")
    openapi = find_crate(registry, "k8s-openapi")
    json_names = openapi_names(openapi)
    everywhere = global_names(json_names)
    inline_candidates = []
    out_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proto", "k8s")
    fallbacks = []
    files = []
    src = os.path.join(pb, "src")
    for path in sorted(glob.glob(os.path.join(src, "**", "mod.rs"), recursive=True)):
        module = tuple(os.path.relpath(os.path.dirname(path), src).split(os.sep))
        if module[0] not in ROOTS or module in SKIP:
            continue
        text = open(path, encoding="utf-8").read()
        messages = parse_module(text, module, json_names, everywhere, fallbacks, inline_candidates)
        if not messages:
            continue
        files.append((module, messages))
    by_module = {m: msgs for m, msgs in files}
    fields_of = {}
    for module, messages in files:
        for name, fields in messages:
            fields_of[".k8s." + ".".join(module + (name,))] = [
                re.search(r'json_name = "([^"]*)"', f).group(1) for f in fields
            ]
    for module, name, rust, target, known in inline_candidates:
        inner = fields_of.get(target, [])
        values = set(known.values())
        if inner and all(j in values or j == INLINE for j in inner):
            continue
        # Not embedded: a field k8s-openapi does not have (version skew).
        json = everywhere.get(norm(rust)) or camel(rust)
        fallbacks.append(f"{'.'.join(module)}.{name}.{rust} -> {json}")
        msgs = by_module[module]
        for i, (n, fields) in enumerate(msgs):
            if n == name:
                ident = norm(rust) or rust
                msgs[i] = (n, [
                    f.replace(f'json_name = "{INLINE}"', f'json_name = "{json}"')
                    if re.search(rf" {ident} = \d+ ", f) else f
                    for f in fields
                ])
    for module, messages in files:
        deps = set()
        for _, fields in messages:
            for line in fields:
                for ref in re.findall(r"\.k8s\.([\w.]+)\.\w+", line):
                    dep = tuple(ref.split("."))
                    if dep != module:
                        if dep not in by_module:
                            sys.exit(f"{'.'.join(module)} refers to {'.'.join(dep)}, not generated")
                        deps.add(dep)
        rel = os.path.join(*module) + ".proto"
        out = os.path.join(out_root, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w", encoding="utf-8") as w:
            w.write("// Generated by scripts/gen-k8s-schema.py from the k8s-pb and k8s-openapi crates: do not edit.\n")
            w.write('syntax = "proto2";\n\n')
            w.write(f"package k8s.{'.'.join(module)};\n\n")
            for d in sorted(deps):
                w.write(f'import "{"/".join(d)}.proto";\n')
            if deps:
                w.write("\n")
            for name, fields in messages:
                w.write(f"message {name} {{\n")
                for line in fields:
                    w.write(line + "\n")
                w.write("}\n\n")
    for f in fallbacks:
        print("no JSON name in k8s-openapi, camel case used:", f, file=sys.stderr)
    print(f"{len(files)} files, {sum(len(m) for _, m in files)} messages, {len(fallbacks)} fallbacks", file=sys.stderr)


if __name__ == "__main__":
    main()
