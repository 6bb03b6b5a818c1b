"""Label and field selectors as the apiserver parses them."""

import re

from fakekube_errors import bad_request

_KEY = re.compile(r"^([a-z0-9A-Z][-a-z0-9A-Z_.]*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VAL = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _split_top(s):
    parts, depth, cur = [], 0, []
    for c in s:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


def _check_key(k, whole):
    if not k or len(k.rpartition("/")[2]) > 63 or not _KEY.match(k):
        raise bad_request("unable to parse requirement: <nil>: Invalid value: \"%s\": name part "
                          "must consist of alphanumeric characters, '-', '_' or '.', and must "
                          "start and end with an alphanumeric character" % k)


def _check_val(v):
    if len(v) > 63 or not _VAL.match(v):
        raise bad_request("unable to parse requirement: values[0][%s]: Invalid value: \"%s\": "
                          "a valid label must be an empty string or consist of alphanumeric "
                          "characters, '-', '_' or '.', and must start and end with an "
                          "alphanumeric character" % (v, v))


def parse_label_selector(s):
    """-> list of (key, op, values); op in = != in notin exists !exists."""
    reqs = []
    if s is None or s.strip() == "":
        return reqs
    for part in _split_top(s):
        p = part.strip()
        if not p:
            raise bad_request("found '', expected: !, identifier, or 'end of string'")
        m = re.match(r"^(\S+?)\s+(in|notin)\s*\((.*)\)$", p)
        if m:
            key, op, vals = m.group(1), m.group(2), [v.strip() for v in m.group(3).split(",")]
            _check_key(key, s)
            vals = [v for v in vals if v != ""] or [""]
            for v in vals:
                _check_val(v)
            reqs.append((key, op, vals))
            continue
        if p.startswith("!"):
            key = p[1:].strip()
            _check_key(key, s)
            reqs.append((key, "!exists", []))
            continue
        m = re.match(r"^([^=!<>\s]+)\s*(==|=|!=|>|<)\s*(.*)$", p)
        if m:
            key, op, val = m.group(1), m.group(2), m.group(3).strip()
            _check_key(key, s)
            if op in (">", "<"):
                try:
                    int(val)
                except ValueError:
                    raise bad_request("unable to parse requirement: for 'gt', 'lt' operators, "
                                      "the value must be an integer")
                reqs.append((key, op, [val]))
                continue
            _check_val(val)
            reqs.append((key, "!=" if op == "!=" else "=", [val]))
            continue
        if re.match(r"^\S+$", p):
            _check_key(p, s)
            reqs.append((p, "exists", []))
            continue
        raise bad_request("unable to parse requirement: found '%s', expected: "
                          "in, notin, =, ==, !=, gt, lt" % p.split()[-1])
    return reqs


def labels_match(reqs, labels):
    labels = labels or {}
    for key, op, vals in reqs:
        has = key in labels
        v = labels.get(key)
        if op == "=" and not (has and v == vals[0]):
            return False
        if op == "!=" and has and v == vals[0]:
            return False
        if op == "in" and not (has and v in vals):
            return False
        if op == "notin" and has and v in vals:
            return False
        if op == "exists" and not has:
            return False
        if op == "!exists" and has:
            return False
        if op in (">", "<"):
            try:
                n = int(v)
            except (TypeError, ValueError):
                return False
            if op == ">" and not n > int(vals[0]):
                return False
            if op == "<" and not n < int(vals[0]):
                return False
    return True


FIELDS = {
    "*": ["metadata.name", "metadata.namespace"],
    "Pod": ["spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
            "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
            "status.nominatedNodeName"],
    "Secret": ["type"],
    "Event": ["involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
              "involvedObject.uid", "involvedObject.apiVersion",
              "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
              "reportingComponent", "source", "type"],
    "Namespace": ["status.phase"],
}


def parse_field_selector(s, kind):
    reqs = []
    if s is None or s.strip() == "":
        return reqs
    allowed = FIELDS["*"] + FIELDS.get(kind, [])
    for part in s.split(","):
        p = part.strip()
        m = re.match(r"^([^=!]+?)\s*(==|=|!=)\s*(.*)$", p)
        if not m:
            raise bad_request("invalid selector: '%s'; can't understand '%s'" % (s, p))
        field, op, val = m.group(1).strip(), m.group(2), m.group(3).strip()
        if field not in allowed:
            raise bad_request('"%s" is not a known field selector: only "%s"'
                              % (field, '", "'.join(FIELDS["*"] + FIELDS.get(kind, []))))
        reqs.append((field, "!=" if op == "!=" else "=", val))
    return reqs


def _field_value(obj, field):
    if field == "source":
        return ((obj.get("source") or {}).get("component")) or ""
    cur = obj
    for part in field.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(reqs, obj):
    for field, op, val in reqs:
        v = _field_value(obj, field)
        if op == "=" and v != val:
            return False
        if op == "!=" and v == val:
            return False
    return True
