"""Minimal OpenAPI v3 documents.

kubectl (1.27+) with its default ``--validate=strict`` fetches ``/openapi/v3``
and the document of the object's group-version to learn whether the server
supports the ``fieldValidation`` query parameter on PATCH.  When it does,
kubectl skips client-side schema validation and lets the server validate
(``fieldValidation=Strict``).  These documents describe exactly that: every
resource's paths and verbs with their query parameters and the
``x-kubernetes-group-version-kind`` extension, but no schemas (so ``kubectl
explain`` does not work).  ``/openapi/v2`` is not served (kubectl asks for it
only as protobuf and only when v3 is missing).
"""

import hashlib
import json

from fakekube_kinds import KINDS

_Q = {"in": "query", "schema": {"type": "string", "uniqueItems": True}}


def _param(name, desc, typ="string"):
    p = dict(_Q, name=name, description=desc)
    p["schema"] = {"type": typ, "uniqueItems": True}
    return p


_COMMON_WRITE = [
    _param("dryRun", "When present, indicates that modifications should not be persisted."),
    _param("fieldManager", "fieldManager is a name associated with the actor or entity that is "
                           "making these changes."),
    _param("fieldValidation", "fieldValidation instructs the server on how to handle objects "
                              "in the request containing unknown or duplicate fields."),
]
_LIST = [_param(n, n) for n in ("allowWatchBookmarks", "continue", "fieldSelector",
                                "labelSelector", "limit", "resourceVersion",
                                "resourceVersionMatch", "sendInitialEvents",
                                "timeoutSeconds", "watch")]


def _op(k, action, op_id, params, scope_ns):
    return {
        "tags": [k.group.replace(".k8s.io", "") + "_" + k.version if k.group else "core_v1"],
        "description": "%s %s" % (action, k.kind),
        "operationId": op_id,
        "parameters": params,
        "responses": {"200": {"description": "OK"}, "401": {"description": "Unauthorized"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": k.group, "version": k.version,
                                            "kind": k.kind},
    }


def _gv_doc(group, version):
    paths = {}
    for k in KINDS:
        if (k.group, k.version) != (group, version):
            continue
        prefix = "/api/v1" if not group else "/apis/%s/%s" % (group, version)
        base = prefix + ("/namespaces/{namespace}/" if k.namespaced else "/") + k.resource
        ident = k.kind + ("Namespaced" if k.namespaced else "")
        paths[base] = {
            "get": _op(k, "list", "list" + ident, _LIST, k.namespaced),
            "post": _op(k, "post", "create" + ident, list(_COMMON_WRITE), k.namespaced),
            "delete": _op(k, "deletecollection", "deleteCollection" + ident, _LIST,
                          k.namespaced),
        }
        paths[base + "/{name}"] = {
            "get": _op(k, "get", "read" + ident, [], k.namespaced),
            "put": _op(k, "put", "replace" + ident, list(_COMMON_WRITE), k.namespaced),
            "patch": _op(k, "patch", "patch" + ident,
                         list(_COMMON_WRITE) + [_param("force", "Force is going to \"force\" "
                                                       "Apply requests.", "boolean")],
                         k.namespaced),
            "delete": _op(k, "delete", "delete" + ident,
                          [_param("dryRun", "dry run"),
                           _param("gracePeriodSeconds", "grace", "integer"),
                           _param("propagationPolicy", "propagation")], k.namespaced),
        }
    if not paths:
        return None
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.32.4"},
            "paths": paths,
            "components": {"schemas": {}}}


def _gvs():
    seen = []
    for k in KINDS:
        if k.gv not in seen:
            seen.append(k.gv)
    return seen


def _key(g, v):
    return "api/v1" if not g else "apis/%s/%s" % (g, v)


def _hash(doc):
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:128].upper()


def serve(path, query):
    if path == "/openapi/v3":
        return {"paths": {_key(g, v): {"serverRelativeURL": "/openapi/v3/%s?hash=%s"
                                       % (_key(g, v), _hash(_gv_doc(g, v)))}
                          for g, v in _gvs()}}
    if path.startswith("/openapi/v3/"):
        rest = path[len("/openapi/v3/"):]
        for g, v in _gvs():
            if rest == _key(g, v):
                return _gv_doc(g, v)
    return None
