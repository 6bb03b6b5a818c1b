"""Object store: resourceVersion, uid, events for watches, the write
pipeline (decode, validate, default, admit) and the lifecycle timers."""

import copy
import datetime
import heapq
import ipaddress
import random
import threading
import time
import uuid

import fakekube_errors as E
import fakekube_validate as V
from fakekube_kinds import BY_KIND, name_errors, label_errors
from fakekube_lifecycle import Lifecycle


def now_ts():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"
PROTECTED_NS = ("default", "kube-system", "kube-public")


class Scheduler(threading.Thread):
    """One thread running delayed callbacks in order."""

    def __init__(self):
        super().__init__(name="fakekube-timers", daemon=True)
        self.cond = threading.Condition()
        self.heap = []
        self.seq = 0
        self.stopped = False

    def call_later(self, delay, fn):
        with self.cond:
            self.seq += 1
            heapq.heappush(self.heap, (time.monotonic() + max(0.0, delay), self.seq, fn))
            self.cond.notify()

    def stop(self):
        with self.cond:
            self.stopped = True
            self.cond.notify()

    def run(self):
        while True:
            with self.cond:
                while not self.stopped and (not self.heap or self.heap[0][0] > time.monotonic()):
                    self.cond.wait(None if not self.heap else
                                   max(0.0, self.heap[0][0] - time.monotonic()))
                if self.stopped:
                    return
                _, _, fn = heapq.heappop(self.heap)
            try:
                fn()
            except Exception:  # a timer must never kill the thread
                import traceback
                traceback.print_exc()


class Store:
    def __init__(self, ready_delay=1.0, terminate_delay=1.0, history=1000,
                 runtime_classes=("kata-clh",), pod_delete_delay=None,
                 service_cidrs=("10.43.0.0/16",)):
        self.cond = threading.Condition(threading.RLock())
        self.rv = 100
        self.objects = {}          # (kind, ns, name) -> obj
        self.ev_rvs = []
        self.events = []           # (rv, type, kind, ns, obj, oldobj)
        self.compacted_rv = self.rv
        self.history = history
        self.cut_gen = 0
        self.cut_graceful = False
        self.stopping = False
        self.ready_delay = ready_delay
        self.terminate_delay = terminate_delay
        self.pod_delete_delay = terminate_delay if pod_delete_delay is None else pod_delete_delay
        self.timers = Scheduler()
        self.timers.start()
        self.life = Lifecycle(self)
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(BY_KIND["Namespace"], None, {"metadata": {"name": ns}}, manager="fakekube")
        for rc in runtime_classes:
            self.create(BY_KIND["RuntimeClass"], None,
                        {"metadata": {"name": rc}, "handler": rc}, manager="fakekube")
        self._seed_service_range(service_cidrs)

    def _seed_service_range(self, cidrs):
        """As a real cluster (k3s: 10.43.0.0/16): the ServiceCIDR ``kubernetes`` and, in
        ``default``, the Service ``kubernetes`` on the first address of each range; other
        Services get cluster IPs from the first range."""
        nets = [ipaddress.ip_network(c) for c in cidrs]
        self.service_cidrs = [str(n) for n in nets]
        if not nets:
            return
        self.create(BY_KIND["ServiceCIDR"], None,
                    {"metadata": {"name": "kubernetes"}, "spec": {"cidrs": self.service_cidrs},
                     "status": {"conditions": [{"type": "Ready", "status": "True",
                                                "reason": "", "message": "",
                                                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
                    manager="fakekube")
        ips = [str(n.network_address + 1) for n in nets]
        self.create(BY_KIND["Service"], "default",
                    {"metadata": {"name": "kubernetes", "labels": {"component": "apiserver"}},
                     "spec": {"clusterIP": ips[0], "clusterIPs": ips,
                              "ipFamilies": ["IPv%d" % n.version for n in nets],
                              "ports": [{"name": "https", "port": 443, "targetPort": 6443}]}},
                    manager="fakekube")

    def stop(self):
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.timers.stop()

    # ------------------------------------------------------------ events

    def _next_rv(self):
        self.rv += 1
        return self.rv

    def _emit(self, typ, k, ns, obj, old=None):
        self.ev_rvs.append(int(obj["metadata"]["resourceVersion"]))
        self.events.append((int(obj["metadata"]["resourceVersion"]), typ, k.kind, ns,
                            copy.deepcopy(obj), copy.deepcopy(old) if old else None))
        if len(self.events) > self.history:
            drop = len(self.events) - self.history
            self.compacted_rv = self.ev_rvs[drop - 1]
            del self.ev_rvs[:drop]
            del self.events[:drop]
        self.cond.notify_all()

    def compact(self):
        with self.cond:
            self.compacted_rv = self.rv
            self.ev_rvs.clear()
            self.events.clear()
            self.cond.notify_all()
            return self.rv

    def cut_watches(self, graceful=False):
        with self.cond:
            self.cut_gen += 1
            self.cut_graceful = graceful
            self.cond.notify_all()

    def events_after(self, rv):
        """Events with resourceVersion > rv; None when rv is too old."""
        import bisect
        if rv < self.compacted_rv:
            return None
        i = bisect.bisect_right(self.ev_rvs, rv)
        return self.events[i:]

    # ------------------------------------------------------------ reads

    def _key(self, k, ns, name):
        return (k.kind, ns if k.namespaced else None, name)

    def get(self, k, ns, name):
        with self.cond:
            o = self.objects.get(self._key(k, ns, name))
            if o is None:
                raise E.not_found(k, name)
            return copy.deepcopy(o)

    def peek(self, k, ns, name):
        return self.objects.get(self._key(k, ns, name))

    def list(self, k, ns, match=None):
        with self.cond:
            out = []
            for (kind, ons, _), o in self.objects.items():
                if kind != k.kind or (ns and k.namespaced and ons != ns):
                    continue
                if match and not match(o):
                    continue
                out.append(copy.deepcopy(o))
            out.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
            return out, str(self.rv)

    # ------------------------------------------------------------ helpers

    def _check_namespace(self, k, ns, name):
        if not k.namespaced:
            return
        nso = self.objects.get(("Namespace", None, ns))
        if nso is None:
            raise E.ns_not_found(ns)
        if nso["status"].get("phase") == "Terminating":
            raise E.forbidden(k, name, "unable to create new content in namespace %s because "
                                       "it is being terminated" % ns)

    def _decode(self, k, body, validation, warnings, apply=False, ident=None):
        """Decoding checks shared by every write; returns the pruned body."""
        if not isinstance(body, dict):
            raise E.bad_request("%s in version \"%s\" cannot be handled as a %s: json: cannot "
                                "unmarshal %s into Go value of type struct { APIVersion string "
                                "\"json:\\\"apiVersion,omitempty\\\"\"; Kind string "
                                "\"json:\\\"kind,omitempty\\\"\" }"
                                % (k.kind, k.version, k.kind, V._json_type(body)))
        kind = body.get("kind")
        av = body.get("apiVersion")
        if apply:
            if not kind or not av:
                raise E.bad_request("error decoding YAML: Object 'Kind' is missing in "
                                    "'%s'" % _short(body) if not kind else
                                    "error decoding YAML: Object 'apiVersion' is missing")
        if kind and kind != k.kind or av and av != k.api_version:
            raise E.bad_request("the API version in the data (%s) does not match the expected "
                                "API version (%s)" % (av, k.api_version) if av != k.api_version
                                else "%s in version \"%s\" cannot be handled as a %s: the kind "
                                "in the data (%s) does not match the expected kind (%s)"
                                % (kind, k.version, k.kind, kind, k.kind))
        if apply:
            errs = V.apply_check(k.kind, body)
            if errs:
                ns, name = ident
                raise E.internal("failed to create typed patch object (%s/%s; %s, Kind=%s): %s"
                                 % (ns or "", name, _gvstr(k), k.kind,
                                    errs[0] if len(errs) == 1 else
                                    "errors:\n  " + "\n  ".join(errs)))
        err, unknown = V.decode_check(k.kind, body)
        if err:
            raise E.bad_request("%s in version \"%s\" cannot be handled as a %s: %s"
                                % (k.kind, k.version, k.kind, err))
        if unknown:
            if validation == "Strict" and not apply:
                raise E.bad_request("%s in version \"%s\" cannot be handled as a %s: strict "
                                    "decoding error: %s" % (k.kind, k.version, k.kind, ", ".join(
                                        'unknown field "%s"' % u for u in unknown)))
            if validation != "Ignore":
                for u in unknown:
                    warnings.append('unknown field "%s"' % u)
            body = V.prune_unknown(k.kind, body)
        return copy.deepcopy(body)

    def _validate(self, k, obj, old=None):
        md = obj["metadata"]
        name = md.get("name", "")
        causes = []
        for msg in name_errors(k.name_rule, name):
            causes.append(("metadata.name", "FieldValueInvalid",
                           'Invalid value: "%s": %s' % (name, msg)))
        for field, val, msg in label_errors(md.get("labels")):
            causes.append((field, "FieldValueInvalid", 'Invalid value: "%s": %s' % (val, msg)))
        causes += self.life.validate(k, obj, old)
        if causes:
            raise E.invalid(k, name, causes)

    def _managed(self, obj, manager, operation, fields_of, subresource=None):
        if not manager:
            return
        entries = [e for e in obj["metadata"].get("managedFields") or []
                   if not (e.get("manager") == manager and e.get("operation") == operation
                           and e.get("subresource") == subresource)]
        e = {"manager": manager, "operation": operation, "apiVersion": obj.get("apiVersion"),
             "time": now_ts(), "fieldsType": "FieldsV1", "fieldsV1": fieldset(fields_of)}
        if subresource:
            e["subresource"] = subresource
        entries.append(e)
        obj["metadata"]["managedFields"] = entries

    # ------------------------------------------------------------ writes

    def create(self, k, ns, body, validation="Warn", dry_run=False, manager=None,
               warnings=None, apply=False, operation="Update"):
        warnings = [] if warnings is None else warnings
        with self.cond:
            body = self._decode(k, body, validation, warnings, apply=apply,
                                ident=(ns, (body.get("metadata") or {}).get("name", "")
                                       if isinstance(body, dict) else ""))
            md = body.setdefault("metadata", {}) or {}
            body["metadata"] = md
            if k.namespaced:
                bns = md.get("namespace")
                if bns and bns != ns:
                    raise E.bad_request("the namespace of the provided object does not match "
                                        "the namespace sent on the request")
                md["namespace"] = ns
            else:
                md.pop("namespace", None)
            if not md.get("name"):
                if md.get("generateName"):
                    md["name"] = md["generateName"] + "".join(
                        random.choice(_GEN_CHARS) for _ in range(5))
                else:
                    raise E.invalid(k, "", [("metadata.name", "FieldValueRequired",
                                             "Required value: name or generateName is "
                                             "required")])
            name = md["name"]
            self._check_namespace(k, ns, name)
            body["apiVersion"] = k.api_version
            body["kind"] = k.kind
            for f in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "selfLink"):
                md.pop(f, None)
            md.pop("generation", None)
            self.life.default(k, body, None)
            self._validate(k, body)
            if self._key(k, ns, name) in self.objects:
                raise E.already_exists(k, name)
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_ts()
            md["generation"] = 1
            self._managed(body, manager, operation, _fields_for_managed(body))
            body = _order(body)
            md = body["metadata"]
            if dry_run:
                return body
            md["resourceVersion"] = str(self._next_rv())
            self.objects[self._key(k, ns, name)] = body
            self._emit("ADDED", k, ns, body)
            self.life.created(k, body)
            return copy.deepcopy(body)

    def _store_update(self, k, ns, name, old, new, manager, operation, fields_of,
                      dry_run, subresource=None):
        """Common tail of update/patch/apply."""
        new["apiVersion"] = k.api_version
        new["kind"] = k.kind
        md = new.setdefault("metadata", {})
        omd = old["metadata"]
        if md.get("name") not in (None, name):
            raise E.bad_request("the name of the object (%s) does not match the name on the "
                                "URL (%s)" % (md.get("name"), name))
        if k.namespaced and md.get("namespace") not in (None, ns):
            raise E.bad_request("the namespace of the provided object does not match the "
                                "namespace sent on the request")
        md["name"] = name
        if k.namespaced:
            md["namespace"] = ns
        for f in ("uid", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "generation"):
            if f in omd:
                md[f] = omd[f]
            else:
                md.pop(f, None)
        if subresource == "status":
            keep = copy.deepcopy(old)
            keep["status"] = new.get("status", {})
            new = keep
            md = new["metadata"]
        elif "status" in old and k.kind not in ("Event",):
            new["status"] = copy.deepcopy(old["status"])
        self.life.default(k, new, old)
        self._validate(k, new, old)
        self.life.validate_update(k, new, old)
        if _spec_of(new) != _spec_of(old):
            md["generation"] = int(omd.get("generation", 1)) + 1
        self._managed(new, manager, operation, fields_of, subresource)
        new = _order(new)
        md = new["metadata"]
        unchanged = _without_volatile(new) == _without_volatile(old)
        if dry_run:
            md["resourceVersion"] = omd.get("resourceVersion")
            return new
        if unchanged:
            # a no-op write keeps the resourceVersion and emits no event
            md["resourceVersion"] = omd.get("resourceVersion")
            md["managedFields"] = omd.get("managedFields", md.get("managedFields"))
            return copy.deepcopy(new if new == old else old)
        md["resourceVersion"] = str(self._next_rv())
        self.objects[self._key(k, ns, name)] = new
        self._emit("MODIFIED", k, ns, new, old)
        self.life.updated(k, new, old)
        return copy.deepcopy(new)

    def update(self, k, ns, name, body, validation="Warn", dry_run=False, manager=None,
               warnings=None, subresource=None):
        warnings = [] if warnings is None else warnings
        with self.cond:
            body = self._decode(k, body, validation, warnings)
            old = self.objects.get(self._key(k, ns, name))
            if old is None:
                if k.kind == "Event" and subresource is None:
                    body.setdefault("metadata", {})["name"] = name
                    return self.create(k, ns, body, validation, dry_run, manager, warnings)
                raise E.not_found(k, name)
            md = body.setdefault("metadata", {})
            rv = md.get("resourceVersion")
            if not rv:
                raise E.invalid(k, name, [("metadata.resourceVersion", "FieldValueInvalid",
                                           "Invalid value: 0x0: must be specified for an "
                                           "update")])
            if rv != old["metadata"]["resourceVersion"]:
                raise E.conflict(k, name, "the object has been modified; please apply your "
                                          "changes to the latest version and try again")
            return self._store_update(k, ns, name, old, body, manager, "Update",
                                      _fields_for_managed(body), dry_run, subresource)

    def patch(self, k, ns, name, ptype, patch, validation="Warn", dry_run=False,
              manager=None, force=False, warnings=None, subresource=None):
        warnings = [] if warnings is None else warnings
        with self.cond:
            old = self.objects.get(self._key(k, ns, name))
            if ptype == "apply":
                if not isinstance(patch, dict):
                    raise E.bad_request("error decoding YAML: the patch is not an object")
                body = self._decode(k, patch, validation, warnings, apply=True, ident=(ns, name))
                if old is None:
                    if subresource:
                        raise E.not_found(k, name)
                    bmd = body.setdefault("metadata", {})
                    if bmd.get("name") not in (None, name):
                        raise E.bad_request("the name of the object (%s) does not match the "
                                            "name on the URL (%s)" % (bmd.get("name"), name))
                    bmd["name"] = name
                    return self.create(k, ns, body, "Ignore", dry_run, manager, warnings,
                                       apply=True, operation="Apply")
                new = V.merge_apply(V.schema_at(k.kind, []), _strip_for_apply(old), body)
                if subresource != "status":
                    new["status"] = old.get("status")
                    if new["status"] is None:
                        new.pop("status")
                new["metadata"]["managedFields"] = old["metadata"].get("managedFields", [])
                new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                prv = (body.get("metadata") or {}).get("resourceVersion")
                if prv and prv != old["metadata"]["resourceVersion"]:
                    raise E.conflict(k, name, "the object has been modified; please apply "
                                              "your changes to the latest version and try "
                                              "again")
                return self._store_update(k, ns, name, old, new, manager, "Apply", body,
                                          dry_run, subresource)
            if old is None:
                raise E.not_found(k, name)
            cur = copy.deepcopy(old)
            try:
                if ptype == "merge":
                    if not isinstance(patch, dict):
                        raise E.bad_request("json: cannot unmarshal %s into Go value of type "
                                            "map[string]interface {}" % V._json_type(patch))
                    new = V.merge_json(cur, patch)
                elif ptype == "strategic":
                    if not isinstance(patch, dict):
                        raise E.bad_request("json: cannot unmarshal %s into Go value of type "
                                            "map[string]interface {}" % V._json_type(patch))
                    new = V.merge_strategic(V.schema_at(k.kind, []), cur, patch)
                else:
                    new = V.apply_json_patch(cur, patch)
            except V.JSONPatchError as e:
                raise E.ApiError(422, "Invalid", str(e))
            new = self._decode(k, new, validation, warnings)
            prv = (new.get("metadata") or {}).get("resourceVersion")
            if prv and prv != old["metadata"]["resourceVersion"]:
                raise E.conflict(k, name, "the object has been modified; please apply your "
                                          "changes to the latest version and try again")
            return self._store_update(k, ns, name, old, new, manager, "Update",
                                      _fields_for_managed(new), dry_run, subresource)

    def delete(self, k, ns, name, opts=None, dry_run=False):
        opts = opts or {}
        with self.cond:
            key = self._key(k, ns, name)
            o = self.objects.get(key)
            if o is None:
                raise E.not_found(k, name)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != o["metadata"]["uid"]:
                raise E.conflict(k, name, "Precondition failed: UID in precondition: %s, UID "
                                          "in object meta: %s" % (pre["uid"], o["metadata"]["uid"]))
            if pre.get("resourceVersion") and pre["resourceVersion"] != o["metadata"]["resourceVersion"]:
                raise E.conflict(k, name, "Precondition failed: ResourceVersion in precondition:"
                                          " %s, ResourceVersion in object meta: %s"
                                 % (pre["resourceVersion"], o["metadata"]["resourceVersion"]))
            if k.kind == "Namespace":
                if name in PROTECTED_NS:
                    raise E.forbidden(k, name, "this namespace may not be deleted")
                if o["status"].get("phase") == "Terminating":
                    raise E.conflict(k, name, "The system is ensuring all content is removed "
                                              "from this namespace.  Upon completion, this "
                                              "namespace will automatically be purged by the "
                                              "system.")
                if dry_run:
                    return copy.deepcopy(o), 200
                return self.life.terminate_namespace(o), 200
            grace = opts.get("gracePeriodSeconds")
            if k.kind == "Pod" and (grace is None or int(grace) > 0):
                if o["metadata"].get("deletionTimestamp"):
                    return copy.deepcopy(o), 200
                if dry_run:
                    return copy.deepcopy(o), 200
                return self.life.graceful_delete_pod(o, grace), 200
            if dry_run:
                return copy.deepcopy(o), 200
            return self.remove(k, ns, name), 200

    def remove(self, k, ns, name):
        """Really delete (DELETED event); returns the final object."""
        with self.cond:
            o = self.objects.pop(self._key(k, ns, name), None)
            if o is None:
                return None
            o = copy.deepcopy(o)
            o["metadata"]["resourceVersion"] = str(self._next_rv())
            self._emit("DELETED", k, ns, o)
            return o

    def put_internal(self, k, obj, typ="MODIFIED"):
        """Store a controller-side change (status etc.) and emit an event."""
        with self.cond:
            md = obj["metadata"]
            key = self._key(k, md.get("namespace"), md["name"])
            old = self.objects.get(key)
            md["resourceVersion"] = str(self._next_rv())
            self.objects[key] = obj
            self._emit(typ, k, md.get("namespace"), obj, old)
            return copy.deepcopy(obj)


# ---------------------------------------------------------------- helpers

def _gvstr(k):
    return "%s/%s" % (k.group, k.version)


def _short(body):
    import json
    s = json.dumps(body)
    return s if len(s) < 200 else s[:200]


_TOP_ORDER = ["kind", "apiVersion", "metadata", "spec", "status"]
_MD_ORDER = ["name", "generateName", "namespace", "uid", "resourceVersion", "generation",
             "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
             "annotations", "ownerReferences", "finalizers", "managedFields"]


def _order(obj):
    out = {}
    for k in _TOP_ORDER:
        if k in obj:
            out[k] = obj[k]
    for k, v in obj.items():
        if k not in out:
            out[k] = v
    md = out.get("metadata")
    if isinstance(md, dict):
        m2 = {k: md[k] for k in _MD_ORDER if k in md}
        m2.update({k: v for k, v in md.items() if k not in m2})
        out["metadata"] = m2
    return out


def _spec_of(o):
    return {k: v for k, v in o.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def _without_volatile(o):
    o = copy.deepcopy(o)
    md = o.get("metadata", {})
    for f in ("resourceVersion", "managedFields", "generation"):
        md.pop(f, None)
    return o


def _strip_for_apply(o):
    o = copy.deepcopy(o)
    o.pop("status", None)
    return o


def _fields_for_managed(o):
    o = copy.deepcopy(o)
    md = o.get("metadata", {})
    for f in ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
              "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink",
              "generateName"):
        md.pop(f, None)
    if not md:
        o.pop("metadata", None)
    o.pop("status", None)
    o.pop("kind", None)
    o.pop("apiVersion", None)
    return o


def fieldset(o):
    """A FieldsV1-like set of the fields present in o."""
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            if k in ("kind", "apiVersion"):
                continue
            if isinstance(v, dict):
                out["f:" + k] = fieldset(v)
            elif isinstance(v, list) and v and all(isinstance(e, dict) and "name" in e for e in v):
                out["f:" + k] = {'k:{"name":"%s"}' % e["name"]: dict(fieldset(e), **{".": {}})
                                 for e in v}
            else:
                out["f:" + k] = {}
        return out
    return {}
