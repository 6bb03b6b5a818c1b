/* SPDX-License-Identifier: Apache-2.0 */
/* A session's Kubernetes objects: YAML templates filled in by code, field by field. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"
#include "ca.h"
#include "cluster-ranges.h"
#include "fileio.h"
#include "kube-expose.h"
#include "manifests-private.h"
#include "manifests.h"
#include "rules-private.h" /* up_cidr_normalize() */
#include "yaml-json.h"

int manifests_failf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

bool manifests_is_ip(const char *s)
{
	unsigned char buf[16];

	return s && (inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1);
}

/* "spec.containers.0.env": objects by key, arrays by index. */
json_t *manifests_dig(json_t *v, const char *path)
{
	char buf[256], *save = NULL;

	(void)snprintf(buf, sizeof(buf), "%s", path);
	for (char *t = strtok_r(buf, ".", &save); v && t; t = strtok_r(NULL, ".", &save))
		v = isdigit((unsigned char)*t) ? json_array_get(v, strtoul(t, NULL, 10))
					       : json_object_get(v, t);
	return v;
}

int manifests_put(json_t *o, const char *key, json_t *v)
{
	return json_object_set_new(o, key, v) == 0 ? 0 : -ENOMEM;
}

int manifests_push(json_t *a, json_t *v)
{
	return json_array_append_new(a, v) == 0 ? 0 : -ENOMEM;
}

/* ---------------------------------------------------------------- building blocks */

static json_t *b64(const void *data, size_t len)
{
	if (len > INT_MAX / 2)
		return NULL;
	char *out = malloc(4 * ((len + 2) / 3) + 1);
	if (!out)
		return NULL;
	int n = EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	json_t *s = json_stringn(out, (size_t)n);
	up_free_secret(out, (size_t)n);
	return s;
}

static int iso8601(json_t *o, const char *key, time_t t)
{
	struct tm tm;
	char buf[32];

	if (!gmtime_r(&t, &tm) || strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return -EINVAL;
	return manifests_put(o, key, json_string(buf));
}

/* A template copy with name, namespace and the session's labels. */
json_t *manifests_object(struct render *c, enum tpl t, const char *name)
{
	json_t *o = json_deep_copy(c->m->tpl[t]);
	json_t *meta = json_object_get(o, "metadata");
	json_t *labels = json_object_get(meta, "labels");

	if (!o || manifests_put(meta, "name", json_string(name)) < 0 ||
	    (t != TPL_NAMESPACE && manifests_put(meta, "namespace", json_string(c->ns)) < 0) ||
	    manifests_put(labels, UP_LABEL_SESSION, json_string(c->s->id)) < 0 ||
	    manifests_put(labels, UP_LABEL_OWNER, json_string(c->s->owner)) < 0)
		return json_decref(o), NULL;
	return o;
}

int manifests_add(struct render *c, json_t *o)
{
	return o ? manifests_push(c->objects, o) : -ENOMEM;
}

/* A Secret (base64 data) or ConfigMap (text data; binaryData for what is not UTF-8). */
static json_t *data_object(struct render *c, bool secret, const char *name)
{
	json_t *o = manifests_object(c, secret ? TPL_SECRET : TPL_CONFIGMAP, name);

	if (o && manifests_put(o, "data", json_object()) < 0)
		return json_decref(o), NULL;
	return o;
}

int manifests_data_put(json_t *o, bool secret, const char *key, const char *data, size_t len)
{
	json_t *v = secret ? NULL : json_stringn(data, len);

	if (v)
		return manifests_put(json_object_get(o, "data"), key, v);
	json_t *bin = secret ? json_object_get(o, "data") : json_object_get(o, "binaryData");
	if (!bin && (manifests_put(o, "binaryData", json_object()) < 0 ||
		     !(bin = json_object_get(o, "binaryData"))))
		return -ENOMEM;
	return (v = b64(data, len)) ? manifests_put(bin, key, v) : -ENOMEM;
}

int manifests_env_add(json_t *env, const char *name, const char *value)
{
	json_t *e;
	size_t i;

	json_array_foreach (env, i, e)
		if (streq(json_string_value(json_object_get(e, "name")), name))
			return -EEXIST;
	return manifests_push(env, json_pack("{s:s, s:s}", "name", name, "value", value));
}

json_t *manifests_strv(const char *const *v)
{
	json_t *a = json_array();

	for (; a && v && *v; v++)
		if (manifests_push(a, json_string(*v)) < 0)
			return json_decref(a), NULL;
	return a;
}

/* ---------------------------------------------------------------- the objects */

static int render_namespace(struct render *c)
{
	json_t *ns = manifests_object(c, TPL_NAMESPACE, c->ns);
	json_t *ann = json_object();

	if (!ns || !ann || manifests_put(json_object_get(ns, "metadata"), "annotations", ann) < 0)
		return json_decref(ns), -ENOMEM;
	if (iso8601(ann, UP_ANNOT_CREATED_AT, c->s->created_at) < 0 ||
	    iso8601(ann, UP_ANNOT_EXPIRES_AT, c->s->expires_at) < 0 ||
	    manifests_put(ann, UP_ANNOT_CWD, json_string(c->s->cwd)) < 0 ||
	    manifests_put(ann, UP_ANNOT_AGENT, json_string(c->s->agent)) < 0)
		return json_decref(ns), -ENOMEM;
	return manifests_add(c, ns);
}

static int render_rules(struct render *c)
{
	json_t *o = data_object(c, true, UP_MANIFEST_RULES_SECRET);
	char *text = json_dumps(c->s->rules, JSON_COMPACT);
	const char *token = c->s->control_token;
	int r = o && text ? manifests_data_put(o, true, "rules.json", text, strlen(text)) : -ENOMEM;

	if (r == 0 && token)
		r = manifests_data_put(o, true, UP_MANIFEST_CONTROL_KEY, token, strlen(token));
	if (text)
		up_free_secret(text, strlen(text));
	if (r < 0)
		return json_decref(o), r;
	return manifests_add(c, o);
}

static int render_certs(struct render *c)
{
	json_t *o = data_object(c, true, UP_MANIFEST_CERTS_SECRET);
	char *both = NULL, *dh = NULL;
	size_t both_len = 0, dh_len = 0;
	int r = o ? 0 : -ENOMEM;

	if (r == 0)
		r = up_ca_mitmproxy_pem(c->s->ca_cert_pem, c->s->ca_key_pem, &both, &both_len);
	if (r == 0)
		r = up_ca_dhparam_pem(&dh, &dh_len);
	if (r == 0)
		r = manifests_data_put(o, true, "mitmproxy-ca.pem", both, both_len);
	if (r == 0)
		r = manifests_data_put(o, true, "mitmproxy-ca-cert.pem", c->s->ca_cert_pem,
				       strlen(c->s->ca_cert_pem));
	if (r == 0)
		r = manifests_data_put(o, true, "mitmproxy-dhparam.pem", dh, dh_len);
	up_free_secret(both, both_len);
	free(dh);
	if (r < 0)
		return json_decref(o), r;
	return manifests_add(c, o);
}

static int render_text_map(struct render *c, const char *name, const char *key, const char *text)
{
	json_t *o = data_object(c, false, name);
	int r = o ? manifests_data_put(o, false, key, text, strlen(text)) : -ENOMEM;

	if (r < 0)
		return json_decref(o), r;
	return manifests_add(c, o);
}

/* The addon's ConfigMap: filter.py (or the spec's own) and the modules it loads. */
static int render_addon(struct render *c)
{
	json_t *o = data_object(c, false, UP_MANIFEST_ADDON_CONFIGMAP);
	int r = o ? 0 : -ENOMEM;

	for (size_t i = 0; r == 0 && i < MANIFESTS_ADDON_FILES; i++) {
		const char *text =
			i == 0 && c->s->addon_source ? c->s->addon_source : c->m->addon[i];
		r = manifests_data_put(o, false, manifests_addon_files[i], text, strlen(text));
	}
	if (r < 0)
		return json_decref(o), r;
	return manifests_add(c, o);
}

static int render_agent_data(struct render *c)
{
	for (size_t i = 0; i < c->s->contrib.n_volumes; i++) {
		const struct up_agent_volume *v = &c->s->contrib.volumes[i];
		bool secret = v->kind == UP_AGENT_VOL_SECRET;
		if (!secret && v->kind != UP_AGENT_VOL_CONFIGMAP)
			continue;
		json_t *o = data_object(c, secret, v->name);
		int r = o ? 0 : -ENOMEM;
		for (size_t j = 0; r == 0 && j < v->n_files; j++)
			r = manifests_data_put(o, secret, v->files[j].key, v->files[j].data,
					       v->files[j].len);
		if (r < 0)
			return json_decref(o), r;
		if ((r = manifests_add(c, o)) < 0)
			return r;
	}
	return 0;
}

/* --kube-context: the agent's kubeconfig (no secret), the mitm's client certificates. */
static int render_kube_data(struct render *c)
{
	const struct up_session_extras *x = c->s->extras;
	json_t *doc = up_kube_expose_kubeconfig(x->kube, c->s->ca_cert_pem), *o;
	char *text = doc ? up_yaml_dump(doc) : NULL, key[300];
	int r;

	json_decref(doc);
	r = text ? render_text_map(c, UP_KUBE_CONFIGMAP, "config", text) : -ENOMEM;
	free(text);
	if (r < 0 || !manifests_has_kube_certs(x))
		return r;
	o = data_object(c, true, UP_KUBE_CERTS_SECRET);
	for (size_t i = 0; o && r == 0 && i < x->kube->n; i++) {
		const struct up_kube_exposed_ctx *k = &x->kube->ctx[i];
		(void)snprintf(key, sizeof(key), "%s.pem", k->host);
		if (k->client_pem) /* mitmproxy presents <server name>.pem (its client_certs option)
				    */
			r = manifests_data_put(o, true, key, k->client_pem, k->client_len);
	}
	if (!o || r < 0)
		return json_decref(o), o ? r : -ENOMEM;
	return manifests_add(c, o);
}

static int render_files(struct render *c, const char *name, const struct up_ssh_file *f, size_t n)
{
	json_t *o = data_object(c, true, name);
	int r = o ? 0 : -ENOMEM;

	for (size_t i = 0; r == 0 && i < n; i++)
		r = manifests_data_put(o, true, f[i].name, f[i].data, f[i].len);
	if (r < 0)
		return json_decref(o), r;
	return manifests_add(c, o);
}

/*
 * The extras' data objects, in this order: the kube contexts' kubeconfig and client
 * certificates, the upstream CA bundle, AWS, the git overlay, the SSH keys; each only when
 * there is one (docs/architecture.md, "What a session borrows from the host").
 */
static int render_extras_data(struct render *c)
{
	const struct up_session_extras *x = c->s->extras;
	json_t *o;
	int r;

	if (manifests_has_kube(x) && (r = render_kube_data(c)) < 0)
		return r;
	if (x && x->mitm_ca_pem && *x->mitm_ca_pem) {
		o = data_object(c, true, UPSTREAM_CA_SECRET);
		r = o ? manifests_data_put(o, true, "bundle.pem", x->mitm_ca_pem,
					   strlen(x->mitm_ca_pem))
		      : -ENOMEM;
		if (r < 0 || (r = manifests_add(c, TAKE_PTR(o))) < 0)
			return json_decref(o), r;
	}
	if (x && x->aws_creds_json && x->aws_ini) { /* the mitm's real keys, then the dummies */
		o = data_object(c, true, AWS_MITM_SECRET);
		r = o ? manifests_data_put(o, true, AWS_MITM_KEY, x->aws_creds_json,
					   strlen(x->aws_creds_json))
		      : -ENOMEM;
		if (r < 0 || (r = manifests_add(c, TAKE_PTR(o))) < 0)
			return json_decref(o), r;
		if ((r = render_text_map(c, AWS_AGENT_CONFIGMAP, AWS_AGENT_KEY, x->aws_ini)) < 0)
			return r;
	}
	if (x && x->gitconfig && *x->gitconfig) {
		o = data_object(c, true, GIT_SECRET);
		r = o ? manifests_data_put(o, true, GIT_KEY, x->gitconfig, strlen(x->gitconfig))
		      : -ENOMEM;
		if (r < 0 || (r = manifests_add(c, TAKE_PTR(o))) < 0)
			return json_decref(o), r;
	}
	if (manifests_has_ssh(c->s)) {
		/* The private keys for the holder pod alone; their public halves for the agent. */
		if ((r = render_files(c, UP_MANIFEST_SSH_KEYS_SECRET, x->ssh.keys, x->ssh.n_keys)) <
		    0)
			return r;
		return render_files(c, UP_MANIFEST_SSH_PUB_SECRET, x->ssh.pub, x->ssh.n_pub);
	}
	return 0;
}

/* --ssh-cidr: one egress rule, TCP 22 to exactly those networks. */
static int ssh_egress(struct render *c, json_t *agent)
{
	const struct up_session_extras *x = c->s->extras;
	json_t *to, *v;
	size_t i;

	if (!x || json_array_size(x->ssh_cidrs) == 0)
		return 0;
	if (!(to = json_array()))
		return -ENOMEM;
	json_array_foreach (x->ssh_cidrs, i, v)
		if (manifests_push(to, json_pack("{s:{s:O}}", "ipBlock", "cidr", v)) < 0)
			return json_decref(to), -ENOMEM;
	return manifests_push(manifests_dig(agent, "spec.egress"),
			      json_pack("{s:o, s:[{s:s, s:i}]}", "to", to, "ports", "protocol",
					"TCP", "port", 22));
}

static int render_policies(struct render *c)
{
	json_t *deny = manifests_object(c, TPL_NP_DENY, "default-deny");
	json_t *agent = manifests_object(c, TPL_NP_AGENT, "agent-egress");
	json_t *mitm = manifests_object(c, TPL_NP_MITM, "mitm-policy");
	int r = 0;

	if (agent && c->s->asked.allow_dns)
		r = manifests_push(manifests_dig(agent, "spec.egress"),
				   json_deep_copy(c->m->tpl[TPL_NP_AGENT_DNS]));
	if (agent && r == 0)
		r = ssh_egress(c, agent);
	if (agent && r == 0 && manifests_has_ssh(c->s))
		r = manifests_push(manifests_dig(agent, "spec.egress"),
				   json_deep_copy(c->m->tpl[TPL_NP_AGENT_SSH]));
	if (!deny || !agent || !mitm || r < 0) {
		json_decref(deny);
		json_decref(agent);
		json_decref(mitm);
		return -ENOMEM;
	}
	r = manifests_add(c, deny);
	r = r < 0 ? (json_decref(agent), r) : manifests_add(c, agent);
	r = r < 0 ? (json_decref(mitm), r) : manifests_add(c, mitm);
	if (r == 0 && manifests_has_ssh(c->s))
		r = manifests_add(c, manifests_object(c, TPL_NP_SSH, "ssh-agent-policy"));
	return r;
}

/* `--set NAME=VALUE`, in place of the template's own NAME if it has one: mitmdump refuses
 * an option given twice. */
int manifests_set_option(json_t *args, const char *opt)
{
	size_t n = strcspn(opt, "=") + 1, i;
	int r;

	for (i = 0; i + 1 < json_array_size(args); i++) {
		const char *flag = json_string_value(json_array_get(args, i));
		const char *val = json_string_value(json_array_get(args, i + 1));
		if (flag && val && !strcmp(flag, "--set") && !strncmp(val, opt, n))
			return json_array_set_new(args, i + 1, json_string(opt)) < 0 ? -ENOMEM : 0;
	}
	r = manifests_push(args, json_string("--set"));
	return r < 0 ? r : manifests_push(args, json_string(opt));
}

/* A Secret of the mitm's, mounted whole (read-only) at `dir` and named by an addon option. */
static int mitm_secret(json_t *pod, const char *option, const char *secret, const char *dir)
{
	json_t *main = manifests_dig(pod, "spec.containers.0");
	int r = manifests_set_option(json_object_get(main, "args"), option);

	if (r == 0)
		r = manifests_push(json_object_get(main, "volumeMounts"),
				   json_pack("{s:s, s:s, s:b}", "name", secret, "mountPath", dir,
					     "readOnly", 1));
	if (r == 0)
		r = manifests_push(manifests_dig(pod, "spec.volumes"),
				   json_pack("{s:s, s:{s:s}}", "name", secret, "secret",
					     "secretName", secret));
	return r;
}

/* --mitm-ca-cert and the kube CAs, kube client certificates, the AWS map, --mitm-insecure,
 * --mitm-debug (manifests/mitm/README.md, "Running it"). */
static int mitm_extras(const struct up_session_extras *x, const struct up_session_asked *a,
		       json_t *pod)
{
	json_t *args = manifests_dig(pod, "spec.containers.0.args");
	int r = 0;

	if (x->mitm_ca_pem && *x->mitm_ca_pem)
		r = mitm_secret(pod, "uplink_extra_ca=" UPSTREAM_CA_DIR "/bundle.pem",
				UPSTREAM_CA_SECRET, UPSTREAM_CA_DIR);
	if (r == 0 && manifests_has_kube_certs(x))
		r = mitm_secret(pod, "client_certs=" UP_KUBE_CERTS_DIR, UP_KUBE_CERTS_SECRET,
				UP_KUBE_CERTS_DIR);
	if (r == 0 && x->aws_creds_json && x->aws_ini)
		r = mitm_secret(pod, "uplink_aws_creds=" AWS_MITM_DIR "/" AWS_MITM_KEY,
				AWS_MITM_SECRET, AWS_MITM_DIR);
	if (r == 0 && a->mitm_insecure)
		r = manifests_set_option(args, "ssl_insecure=true");
	if (r == 0 && a->mitm_debug)
		r = manifests_set_option(args, "termlog_verbosity=debug");
	if (r == 0 && a->mitm_debug)
		r = manifests_set_option(args, "flow_detail=3");
	return r;
}

/* The cluster's Service ranges: `--set uplink_refuse_cidrs=A,B` (manifests/mitm/README.md). */
static int mitm_refuse_cidrs(struct render *c, json_t *pod)
{
	const json_t *cidrs = c->s->refuse_cidrs, *v;
	char opt[64 + UP_MAX_SERVICE_CIDRS * (INET6_ADDRSTRLEN + 5)] = "uplink_refuse_cidrs=";
	char norm[INET6_ADDRSTRLEN + 8];
	size_t i, n = strlen(opt);

	if (json_array_size(cidrs) == 0)
		return 0;
	json_array_foreach (cidrs, i, v) {
		const char *s = json_string_value(v);
		if (i >= UP_MAX_SERVICE_CIDRS || !s || up_cidr_normalize(s, norm, sizeof(norm)) < 0)
			return manifests_failf(c->err, c->err_len,
					       "refuse_cidrs[%zu] is not one of up to %d CIDRs", i,
					       UP_MAX_SERVICE_CIDRS);
		n += (size_t)snprintf(opt + n, sizeof(opt) - n, "%s%s", i ? "," : "", norm);
	}
	return manifests_set_option(manifests_dig(pod, "spec.containers.0.args"), opt);
}

/* Adds a pod and its Service once they are filled in (r == 0); frees both otherwise. */
int manifests_add_pod_and_service(struct render *c, json_t *pod, json_t *svc, int r)
{
	if (r < 0) {
		json_decref(pod);
		json_decref(svc);
		return r;
	}
	r = manifests_add(c, pod);
	return r < 0 ? (json_decref(svc), r) : manifests_add(c, svc);
}

static int render_mitm(struct render *c)
{
	json_t *pod = manifests_object(c, TPL_MITM_POD, "mitm");
	json_t *svc = manifests_object(c, TPL_MITM_SVC, "mitm");
	const char *rc = c->s->mitm_runtime_class;
	int r = pod && svc ? 0 : -ENOMEM;

	if (r == 0)
		r = manifests_put(manifests_dig(pod, "spec.containers.0"), "image",
				  json_string(c->s->mitm_image));
	if (r == 0 && rc && *rc)
		r = manifests_put(json_object_get(pod, "spec"), "runtimeClassName",
				  json_string(rc));
	if (r == 0 && c->s->extras)
		r = mitm_extras(c->s->extras, &c->s->asked, pod);
	if (r == 0)
		r = mitm_refuse_cidrs(c, pod);
	if (r == 0 && c->s->control_token) /* the rules Secret is mounted at /rules */
		r = manifests_set_option(manifests_dig(pod, "spec.containers.0.args"),
					 "uplink_control_token=/rules/" UP_MANIFEST_CONTROL_KEY);
	if (r == 0 && c->s->control_token && c->s->ask)
		r = manifests_set_option(manifests_dig(pod, "spec.containers.0.args"),
					 "uplink_ask=true");
	return manifests_add_pod_and_service(c, pod, svc, r);
}

static int render_ca(struct render *c)
{
	return render_text_map(c, UP_MANIFEST_CA_CONFIGMAP, "ca.crt", c->s->ca_cert_pem);
}

static int render_ssh_agent(struct render *c)
{
	return manifests_has_ssh(c->s) ? manifests_render_ssh_agent(c) : 0;
}

/* A session's objects, in the order they are applied (the namespace first). */
static int (*const session_objects[])(struct render *c) = {
	render_namespace, render_addon,	     render_rules,	     render_certs,
	render_ca,	  render_agent_data, render_extras_data,     render_policies,
	render_mitm,	  render_ssh_agent,  manifests_render_agent,
};

int up_manifests_render(const struct up_manifests *tpl, const struct up_session_spec *spec,
			json_t **objects, char *err, size_t err_len)
{
	struct render c = {.m = tpl, .s = spec, .err = err, .err_len = err_len};
	int r;

	if (err_len)
		err[0] = '\0';
	if ((r = manifests_check_spec(spec, err, err_len)) < 0)
		return r;
	(void)snprintf(c.ns, sizeof(c.ns), UP_SESSION_NS_PREFIX "%s", spec->id);
	c.objects = json_array();
	r = c.objects ? 0 : -ENOMEM;
	for (size_t i = 0; r == 0 && i < ELEMENTSOF(session_objects); i++)
		r = session_objects[i](&c);
	if (r < 0) {
		json_decref(c.objects);
		if (err_len && !err[0])
			(void)snprintf(err, err_len, "cannot render the session's objects: %s",
				       strerror(-r));
		return r;
	}
	*objects = c.objects;
	return 0;
}

int up_manifests_render_system(const struct up_manifests *tpl, const struct up_system_spec *sys,
			       json_t **objects, char *err, size_t err_len)
{
	json_t *a = json_array();
	json_t *ns = json_deep_copy(tpl->tpl[TPL_SYS_NAMESPACE]);
	json_t *dep = json_deep_copy(tpl->tpl[TPL_REGISTRY]);
	json_t *svc = json_deep_copy(tpl->tpl[TPL_REGISTRY_SVC]);
	const char *image =
		sys && sys->registry_image ? sys->registry_image : UP_REGISTRY_IMAGE_DEFAULT;
	int r = a && ns && dep && svc ? 0 : -ENOMEM;

	if (r == 0 && !*image)
		r = manifests_failf(err, err_len, "the registry image is empty");
	if (r == 0)
		r = manifests_put(manifests_dig(dep, "spec.template.spec.containers.0"), "image",
				  json_string(image));
	if (r == 0 && (r = manifests_push(a, TAKE_PTR(ns))) == 0 &&
	    (r = manifests_push(a, TAKE_PTR(dep))) == 0)
		r = manifests_push(a, TAKE_PTR(svc));
	json_decref(ns);
	json_decref(dep);
	json_decref(svc);
	if (r < 0)
		return json_decref(a), r;
	*objects = a;
	return 0;
}
