"""Kubernetes ``Status`` errors."""


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self):
        return status_body(self.code, self.reason, self.message, self.details)


def status_body(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message}
    if reason:
        s["reason"] = reason
    if details:
        s["details"] = details
    s["code"] = code
    return s


def _details(k, name, extra=None):
    d = {"name": name}
    if k.group:
        d["group"] = k.group
    d["kind"] = k.resource
    if extra:
        d.update(extra)
    return d


def not_found(k, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (k.qualified, name), _details(k, name))


def ns_not_found(name):
    return ApiError(404, "NotFound", 'namespaces "%s" not found' % name,
                    {"name": name, "kind": "namespaces"})


def already_exists(k, name):
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (k.qualified, name),
                    _details(k, name))


def conflict(k, name, why):
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                    % (k.qualified, name, why), _details(k, name))


def forbidden(k, name, why):
    return ApiError(403, "Forbidden", '%s "%s" is forbidden: %s' % (k.qualified, name, why),
                    _details(k, name))


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


def internal(msg):
    return ApiError(500, "", msg)


def invalid(k, name, causes):
    """causes: [(field, reason, message)] with reason FieldValueRequired /
    FieldValueInvalid / ...; message as printed after the field."""
    parts = ["%s: %s" % (f, m) for f, _, m in causes]
    msg = '%s "%s" is invalid: ' % (k.kind if k.kind else k.resource, name)
    msg += parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    d = _details(k, name)
    d["kind"] = k.kind
    d["causes"] = [{"reason": r, "message": m, "field": f} for f, r, m in causes]
    return ApiError(422, "Invalid", msg, d)


def method_not_allowed():
    return ApiError(405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource")


def not_found_path():
    return ApiError(404, "NotFound", "the server could not find the requested resource",
                    {})


def unsupported_media(ct):
    return ApiError(415, "UnsupportedMediaType",
                    'the body of the request was in an unknown format - accepted media types '
                    'include: application/json-patch+json, application/merge-patch+json, '
                    'application/apply-patch+yaml' if ct is None else
                    'the body of the request was in an unknown format - accepted media types '
                    'include: application/json-patch+json, application/merge-patch+json, '
                    'application/apply-patch+yaml, application/strategic-merge-patch+json'
                    if ct.startswith("application/") and "patch" in ct else
                    'the body of the request was in an unknown format - accepted media types '
                    'include: application/json, application/yaml, '
                    'application/vnd.kubernetes.protobuf')
