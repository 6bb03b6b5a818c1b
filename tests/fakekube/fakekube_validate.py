"""Decoding checks and merges driven by fakekube_schema.

* :func:`decode_check` walks an object the way the apiserver's JSON decoder
  does: it returns the type error the decoder would stop at (a string, or
  None) and the list of unknown-field paths in the decoder's notation
  (``spec.containers[0].comand``).
* :func:`apply_check` reports unknown fields the way server-side apply's
  typed conversion does (``.spec.containers[name="c"].comand: field not
  declared in schema``).
* :func:`merge_apply` / :func:`merge_strategic` / :func:`merge_json` merge a
  patch into an object.
"""

import base64
import binascii
import copy
import json

import fakekube_schema as sch
from fakekube_schema import L, M, O


class DecodeError(Exception):
    pass


def _json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _check_scalar(t, v):
    """True when JSON value v decodes into scalar type t."""
    if v is None:
        return True                      # null decodes to the zero value
    if t == sch.ANY:
        return True
    if t in (sch.S, sch.BYTES):
        return isinstance(v, str)
    if t in (sch.I, sch.I64):
        return (isinstance(v, int) and not isinstance(v, bool)) or (
            isinstance(v, float) and v.is_integer())
    if t == sch.N:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == sch.B:
        return isinstance(v, bool)
    if t in (sch.Q, sch.IOS):
        return isinstance(v, (str, int, float)) and not isinstance(v, bool)
    if t == sch.T:
        return isinstance(v, str)
    return True


def _err_type(v, struct, fieldpath, t):
    vt = _json_type(v)
    if vt == "number":
        vt = "number " + json.dumps(v) if isinstance(v, float) else "number"
    return ("json: cannot unmarshal %s into Go struct field %s.%s of type %s"
            % (vt, struct, fieldpath, sch.go_type(t)))


def decode_check(kind, obj):
    """(type_error or None, [unknown field paths])"""
    unknown = []
    state = {"err": None}

    def walk(t, v, path, struct, gopath):
        # path: decoder notation for unknown fields; gopath: dotted field names
        if state["err"]:
            return
        if isinstance(t, O):
            if v is None:
                return
            if not isinstance(v, dict):
                state["err"] = _err_type(v, struct, gopath, t)
                return
            for k, sub in v.items():
                p = k if not path else path + "." + k
                if k not in t.fields:
                    unknown.append(p)
                    continue
                walk(t.fields[k], sub, p, t.go, (gopath + "." + k) if gopath else k)
        elif isinstance(t, L):
            if v is None:
                return
            if not isinstance(v, list):
                state["err"] = _err_type(v, struct, gopath, t)
                return
            for i, e in enumerate(v):
                walk(t.elem, e, "%s[%d]" % (path, i), struct, gopath)
        elif isinstance(t, M):
            if v is None:
                return
            if not isinstance(v, dict):
                state["err"] = _err_type(v, struct, gopath, t)
                return
            for k, e in v.items():
                walk(t.elem, e, "%s.%s" % (path, k), struct, gopath)
        else:
            if not _check_scalar(t, v):
                state["err"] = _err_type(v, struct, gopath, t)
            elif t == sch.BYTES and isinstance(v, str):
                try:
                    base64.b64decode(v, validate=True)
                except (binascii.Error, ValueError):
                    state["err"] = "illegal base64 data at input byte %d" % _bad_b64_pos(v)

    top = sch.KINDS[kind]
    walk(top, obj, "", kind, "")
    return state["err"], unknown


def _bad_b64_pos(s):
    ok = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    for i, c in enumerate(s):
        if c not in ok:
            return i
    return max(0, len(s) - len(s) % 4)


def _key_value(v):
    if isinstance(v, str):
        return json.dumps(v)
    return json.dumps(v)


def _elem_key_path(t, i, e):
    if isinstance(t, L) and t.keys and isinstance(e, dict):
        parts = []
        for k in t.keys:
            val = e.get(k)
            if val is None and k == "protocol":
                val = "TCP"
            if val is None:
                continue
            parts.append("%s=%s" % (k, _key_value(val)))
        if parts:
            return "[" + ",".join(parts) + "]"
    if isinstance(t, L) and t.smp == "$merge" and not isinstance(e, (dict, list)):
        return "[%s]" % json.dumps(e)
    return "[%d]" % i


def apply_check(kind, obj):
    """Unknown-field errors as server-side apply reports them (list of str)."""
    errs = []

    def walk(t, v, path):
        if isinstance(t, O):
            if not isinstance(v, dict):
                if v is not None:
                    errs.append("%s: expected map, got %s" % (path or ".", _json_type(v)))
                return
            for k, sub in v.items():
                p = path + "." + k
                if k not in t.fields:
                    errs.append("%s: field not declared in schema" % p)
                    continue
                walk(t.fields[k], sub, p)
        elif isinstance(t, L):
            if not isinstance(v, list):
                if v is not None:
                    errs.append("%s: expected list, got %s" % (path, _json_type(v)))
                return
            for i, e in enumerate(v):
                walk(t.elem, e, path + _elem_key_path(t, i, e))
        elif isinstance(t, M):
            if isinstance(v, dict):
                for k, e in v.items():
                    walk(t.elem, e, path + "." + k)

    walk(sch.KINDS[kind], obj, "")
    return errs


def schema_at(kind, fieldpath):
    """The schema node at a list of field names (None if unknown)."""
    t = sch.KINDS[kind]
    for f in fieldpath:
        while isinstance(t, L):
            t = t.elem
        if isinstance(t, O):
            t = t.fields.get(f)
        elif isinstance(t, M):
            t = t.elem
        else:
            return None
        if t is None:
            return None
    return t


# ---------------------------------------------------------------- merges

def _list_key(t, e, keys):
    if not isinstance(e, dict):
        return ("__scalar__", json.dumps(e, sort_keys=True))
    out = []
    for k in keys:
        v = e.get(k)
        if v is None and k == "protocol":
            v = "TCP"
        out.append(json.dumps(v, sort_keys=True))
    return tuple(out)


def _merge_keyed(t, cur, patch, keys, mergefn):
    result = [copy.deepcopy(e) for e in cur]
    index = {_list_key(t, e, keys): i for i, e in enumerate(result)}
    for e in patch:
        k = _list_key(t, e, keys)
        if k in index:
            result[index[k]] = mergefn(t.elem, result[index[k]], e)
        else:
            index[k] = len(result)
            result.append(copy.deepcopy(e))
    return result


def merge_apply(t, cur, patch):
    """Server-side apply merge of ``patch`` into ``cur`` (fields not given
    are kept; keyed lists are merged by key, atomic lists replaced)."""
    if isinstance(t, O) or (t is None and isinstance(patch, dict)) or isinstance(t, M) or t == sch.ANY:
        if not isinstance(cur, dict) or not isinstance(patch, dict):
            return copy.deepcopy(patch)
        out = copy.deepcopy(cur)
        for k, v in patch.items():
            if isinstance(t, O):
                sub = t.fields.get(k)
            elif isinstance(t, M):
                sub = t.elem
            else:
                sub = sch.ANY if t == sch.ANY else None
            if sub == sch.ANY and t == sch.ANY:
                out[k] = merge_apply(sch.ANY, out.get(k), v) if isinstance(v, dict) else copy.deepcopy(v)
            elif k in out:
                out[k] = merge_apply(sub, out[k], v)
            else:
                out[k] = copy.deepcopy(v)
        return out
    if isinstance(t, L) and isinstance(cur, list) and isinstance(patch, list):
        if t.keys:
            return _merge_keyed(t, cur, patch, t.keys, merge_apply)
        if t.smp == "$merge":
            out = list(cur)
            for e in patch:
                if e not in out:
                    out.append(e)
            return out
    return copy.deepcopy(patch)


def merge_json(cur, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(cur) if isinstance(cur, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_json(out.get(k), v)
    return out


def merge_strategic(t, cur, patch):
    """A reduced strategic merge patch: merge patch semantics, except that
    lists with a patch merge key are merged by that key, ``$patch: delete``
    removes an element and ``$setElementOrder``/``$retainKeys`` directives
    are dropped."""
    if isinstance(patch, dict):
        if patch.get("$patch") == "replace":
            p = {k: v for k, v in patch.items() if k != "$patch"}
            return copy.deepcopy(p)
        if patch.get("$patch") == "delete":
            return None
        out = copy.deepcopy(cur) if isinstance(cur, dict) else {}
        for k, v in patch.items():
            if k.startswith("$setElementOrder/") or k in ("$retainKeys", "$patch"):
                continue
            if k.startswith("$deleteFromPrimitiveList/"):
                name = k.split("/", 1)[1]
                if isinstance(out.get(name), list):
                    out[name] = [e for e in out[name] if e not in (v or [])]
                continue
            if isinstance(t, O):
                sub = t.fields.get(k)
            elif isinstance(t, M):
                sub = t.elem
            else:
                sub = None
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merge_strategic(sub, out.get(k), v)
        return out
    if isinstance(t, L) and isinstance(patch, list) and isinstance(cur, list):
        if t.smp and t.smp != "$merge":
            key = t.smp
            result = [copy.deepcopy(e) for e in cur]
            for e in patch:
                if not isinstance(e, dict):
                    continue
                idx = next((i for i, r in enumerate(result)
                            if isinstance(r, dict) and r.get(key) == e.get(key)), None)
                if e.get("$patch") == "delete":
                    if idx is not None:
                        result.pop(idx)
                    continue
                if idx is None:
                    result.append(merge_strategic(t.elem, {}, e))
                else:
                    result[idx] = merge_strategic(t.elem, result[idx], e)
            return result
        if t.smp == "$merge":
            out = list(cur)
            for e in patch:
                if e not in out:
                    out.append(e)
            return out
    if isinstance(patch, list):
        return [merge_strategic(t.elem if isinstance(t, L) else None, None, e)
                if isinstance(e, dict) else copy.deepcopy(e) for e in patch]
    return copy.deepcopy(patch)


class JSONPatchError(Exception):
    pass


def _ptr(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise JSONPatchError("invalid JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def apply_json_patch(doc, ops):
    """RFC 6902 JSON patch (add, remove, replace, test, move, copy)."""
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise JSONPatchError("json patch must be a list of operations")

    def parent(d, parts):
        for p in parts[:-1]:
            if isinstance(d, list):
                d = d[int(p)]
            elif isinstance(d, dict) and p in d:
                d = d[p]
            else:
                raise JSONPatchError("doc is missing path: /%s" % "/".join(parts))
        return d

    def get(d, parts):
        for p in parts:
            try:
                d = d[int(p)] if isinstance(d, list) else d[p]
            except (KeyError, IndexError, ValueError, TypeError):
                raise JSONPatchError("doc is missing path: /%s" % "/".join(parts))
        return d

    def remove(d, parts):
        par = parent(d, parts)
        try:
            if isinstance(par, list):
                return par.pop(int(parts[-1]))
            return par.pop(parts[-1])
        except (KeyError, IndexError, ValueError):
            raise JSONPatchError("unable to remove nonexistent key: %s: missing value" % parts[-1])

    def add(d, parts, v):
        if not parts:
            return copy.deepcopy(v)
        par = parent(d, parts)
        last = parts[-1]
        if isinstance(par, list):
            if last == "-":
                par.append(copy.deepcopy(v))
            else:
                par.insert(int(last), copy.deepcopy(v))
        else:
            par[last] = copy.deepcopy(v)
        return d

    for op in ops:
        kind = op.get("op")
        parts = _ptr(op.get("path", ""))
        if kind == "add":
            doc = add(doc, parts, op.get("value"))
        elif kind == "remove":
            remove(doc, parts)
        elif kind == "replace":
            get(doc, parts)
            if not parts:
                doc = copy.deepcopy(op.get("value"))
            else:
                remove(doc, parts)
                doc = add(doc, parts, op.get("value"))
        elif kind == "test":
            if get(doc, parts) != op.get("value"):
                raise JSONPatchError("testing value /%s failed" % "/".join(parts))
        elif kind == "move":
            v = remove(doc, _ptr(op.get("from", "")))
            doc = add(doc, parts, v)
        elif kind == "copy":
            v = get(doc, _ptr(op.get("from", "")))
            doc = add(doc, parts, v)
        else:
            raise JSONPatchError("Unexpected kind: %s" % kind)
    return doc


def prune_unknown(kind, obj):
    """A copy of obj without the fields the schema does not declare (what
    the decoder drops when fieldValidation is Warn or Ignore)."""

    def walk(t, v):
        if isinstance(t, O) and isinstance(v, dict):
            return {k: walk(t.fields[k], sub) for k, sub in v.items() if k in t.fields}
        if isinstance(t, L) and isinstance(v, list):
            return [walk(t.elem, e) for e in v]
        if isinstance(t, M) and isinstance(v, dict):
            return {k: walk(t.elem, e) for k, e in v.items()}
        return copy.deepcopy(v)

    return walk(sch.KINDS[kind], obj)
