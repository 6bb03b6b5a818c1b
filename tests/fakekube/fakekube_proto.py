"""Just enough of Kubernetes' protobuf encoding to decode what kubectl's typed
commands (``kubectl create namespace|configmap|secret``) send: the ``k8s\\0``
envelope (runtime.Unknown) around a Namespace, ConfigMap or Secret.  Other
kinds sent as protobuf are refused with 415 (send JSON or YAML)."""

import base64

MAGIC = b"k8s\x00"


class ProtoError(Exception):
    pass


def _varint(b, i):
    shift = result = 0
    while True:
        if i >= len(b):
            raise ProtoError("truncated varint")
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        if not c & 0x80:
            return result, i
        shift += 7


def fields(b):
    """[(field_number, wire_type, value)]; value is int or bytes."""
    out, i = [], 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v = b[i:i + n]
            if len(v) != n:
                raise ProtoError("truncated field")
            i += n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ProtoError("unsupported wire type %d" % wt)
        out.append((num, wt, v))
    return out


def _s(v):
    return v.decode()


def _map(entries, value=_s):
    out = {}
    for e in entries:
        k = v = None
        for n, _, x in fields(e):
            if n == 1:
                k = _s(x)
            elif n == 2:
                v = value(x)
        out[k] = v if v is not None else value(b"")
    return out


def _time(b):
    import datetime
    secs = 0
    for n, _, x in fields(b):
        if n == 1:
            secs = x
    return datetime.datetime.fromtimestamp(secs, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def _meta(b):
    md, labels, annos, fins = {}, [], [], []
    for n, _, v in fields(b):
        if n in (1, 2, 3, 4, 5, 6):
            md[["name", "generateName", "namespace", "selfLink", "uid",
                "resourceVersion"][n - 1]] = _s(v)
        elif n == 7:
            md["generation"] = v
        elif n == 8:
            md["creationTimestamp"] = _time(v)
        elif n == 11:
            labels.append(v)
        elif n == 12:
            annos.append(v)
        elif n == 14:
            fins.append(_s(v))
    if labels:
        md["labels"] = _map(labels)
    if annos:
        md["annotations"] = _map(annos)
    if fins:
        md["finalizers"] = fins
    return md


def _b64(x):
    return base64.b64encode(x).decode()


def _namespace(fs):
    o = {}
    for n, _, v in fs:
        if n == 1:
            o["metadata"] = _meta(v)
        elif n == 2:
            o["spec"] = {"finalizers": [_s(x) for m, _, x in fields(v) if m == 1]}
    return o


def _configmap(fs):
    o, data, binary = {}, [], []
    for n, _, v in fs:
        if n == 1:
            o["metadata"] = _meta(v)
        elif n == 2:
            data.append(v)
        elif n == 3:
            binary.append(v)
        elif n == 4:
            o["immutable"] = bool(v)
    if data:
        o["data"] = _map(data)
    if binary:
        o["binaryData"] = _map(binary, _b64)
    return o


def _secret(fs):
    o, data, sdata = {}, [], []
    for n, _, v in fs:
        if n == 1:
            o["metadata"] = _meta(v)
        elif n == 2:
            data.append(v)
        elif n == 3:
            o["type"] = _s(v)
        elif n == 4:
            sdata.append(v)
        elif n == 5:
            o["immutable"] = bool(v)
    if data:
        o["data"] = _map(data, _b64)
    if sdata:
        o["stringData"] = _map(sdata)
    return o


DECODERS = {"Namespace": _namespace, "ConfigMap": _configmap, "Secret": _secret}


def decode(body):
    """-> JSON-like dict, or raise ProtoError."""
    if not body.startswith(MAGIC):
        raise ProtoError("missing k8s protobuf magic")
    api_version = kind = None
    raw = b""
    for n, _, v in fields(body[len(MAGIC):]):
        if n == 1:
            for m, _, x in fields(v):
                if m == 1:
                    api_version = _s(x)
                elif m == 2:
                    kind = _s(x)
        elif n == 2:
            raw = v
    dec = DECODERS.get(kind)
    if dec is None:
        raise ProtoError("fakekube cannot decode protobuf %s" % kind)
    obj = dec(fields(raw))
    obj["apiVersion"] = api_version
    obj["kind"] = kind
    return obj
