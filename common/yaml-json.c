/* SPDX-License-Identifier: Apache-2.0 */
#include "yaml-json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "bounds.h"

struct loader {
	yaml_parser_t parser;
	char *err;
	size_t err_len;
	unsigned depth;
};

static int fail(struct loader *l, const yaml_mark_t *m, const char *what)
{
	(void)snprintf(l->err, l->err_len, "line %zu, column %zu: %s", m->line + 1, m->column + 1,
		       what);
	return -EINVAL;
}

static bool is_int(const char *s)
{
	char *end;

	if (!*s)
		return false;
	errno = 0;
	(void)strtoll(s, &end, s[0] == '0' && (s[1] == 'x' || s[1] == 'o') ? 0 : 10);
	return *end == '\0' && errno == 0 && strspn(s, "+-0123456789xabcdefABCDEFo") == strlen(s);
}

static bool plain_null(const char *s)
{
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
	       !strcmp(s, "NULL");
}

static int plain_bool(const char *s)
{
	if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
		return 1;
	if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
		return 0;
	return -1;
}

static bool plain(const yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

bool up_yaml_node_is_null(const yaml_node_t *n)
{
	return !n || (plain(n) && plain_null((const char *)n->data.scalar.value));
}

int up_yaml_node_boolean(const yaml_node_t *n)
{
	if (!n || !plain(n) || strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return -1;
	return plain_bool((const char *)n->data.scalar.value);
}

static json_t *plain_scalar(const char *s)
{
	char *end;
	int b;

	if (plain_null(s))
		return json_null();
	if ((b = plain_bool(s)) >= 0)
		return json_boolean(b);
	if (is_int(s)) {
		if (s[0] == '0' && s[1] == 'o')
			return json_integer(strtoll(s + 2, NULL, 8));
		return json_integer(strtoll(s, NULL, 0));
	}
	if (strspn(s, "+-.0123456789eE") == strlen(s) && strpbrk(s, "0123456789")) {
		double d = strtod(s, &end);
		if (*end == '\0' && isfinite(d))
			return json_real(d);
	}
	return json_string(s);
}

static int next(struct loader *l, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&l->parser, ev)) {
		const char *problem = l->parser.problem ? l->parser.problem : "malformed YAML";
		return fail(l, &l->parser.problem_mark, problem);
	}
	return 0;
}

static int node(struct loader *l, yaml_event_t *ev, json_t **ret);

static int mapping(struct loader *l, json_t **ret)
{
	json_t *obj = json_object();
	yaml_event_t ev;
	int r;

	for (;;) {
		json_t *key = NULL, *val = NULL;

		r = next(l, &ev);
		if (r < 0)
			goto fail;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			*ret = obj;
			return 0;
		}
		if (ev.type != YAML_SCALAR_EVENT) {
			r = fail(l, &ev.start_mark, "mapping keys must be plain strings");
			yaml_event_delete(&ev);
			goto fail;
		}
		yaml_mark_t mark = ev.start_mark;
		key = json_string((const char *)ev.data.scalar.value);
		yaml_event_delete(&ev);
		if (!key) {
			r = fail(l, &mark, "a mapping key is not valid UTF-8");
			goto fail;
		}
		if (json_object_get(obj, json_string_value(key))) {
			char what[200];
			(void)snprintf(what, sizeof(what), "duplicate key '%.100s'",
				       json_string_value(key));
			json_decref(key);
			r = fail(l, &mark, what);
			goto fail;
		}
		r = next(l, &ev);
		if (r >= 0)
			r = node(l, &ev, &val);
		if (r < 0) {
			json_decref(key);
			goto fail;
		}
		(void)json_object_set_new(obj, json_string_value(key), val);
		json_decref(key);
	}
fail:
	json_decref(obj);
	return r;
}

static int sequence(struct loader *l, json_t **ret)
{
	json_t *arr = json_array();
	yaml_event_t ev;
	int r;

	for (;;) {
		json_t *val = NULL;

		r = next(l, &ev);
		if (r < 0)
			break;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			*ret = arr;
			return 0;
		}
		r = node(l, &ev, &val);
		if (r < 0)
			break;
		(void)json_array_append_new(arr, val);
	}
	json_decref(arr);
	return r;
}

/* Consumes `ev` (and the events of its children). */
static int node(struct loader *l, yaml_event_t *ev, json_t **ret)
{
	yaml_mark_t mark = ev->start_mark;
	int r = 0;

	switch (ev->type) {
	case YAML_SCALAR_EVENT: {
		const char *s = (const char *)ev->data.scalar.value;
		bool plain =
			ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag;
		*ret = plain ? plain_scalar(s) : json_stringn(s, ev->data.scalar.length);
		if (!*ret)
			r = fail(l, &mark, "a string is not valid UTF-8");
		break;
	}
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT:
		if (ev->data.mapping_start.anchor) {
			r = fail(l, &mark, "anchors (&name) are not supported");
			break;
		}
		if (++l->depth > UP_MAX_YAML_DEPTH) {
			r = fail(l, &mark, "nested too deeply");
			break;
		}
		r = ev->type == YAML_MAPPING_START_EVENT ? mapping(l, ret) : sequence(l, ret);
		l->depth--;
		break;
	case YAML_ALIAS_EVENT: r = fail(l, &mark, "aliases (*name) are not supported"); break;
	default: r = fail(l, &mark, "unexpected YAML structure"); break;
	}
	yaml_event_delete(ev);
	return r;
}

int up_yaml_load(const char *text, size_t len, json_t **ret, char *err, size_t err_len)
{
	struct loader l = {.err = err, .err_len = err_len};
	yaml_event_t ev;
	json_t *doc = NULL;
	int r;

	if (len > UP_MAX_YAML_SIZE)
		return snprintf(err, err_len, "the document is over %d bytes", UP_MAX_YAML_SIZE),
		       -EFBIG;
	if (!yaml_parser_initialize(&l.parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&l.parser, (const unsigned char *)text, len);
	/* Stream start, then a document start, or the stream's end for an empty one. */
	for (;;) {
		r = next(&l, &ev);
		if (r < 0)
			goto out;
		yaml_event_type_t t = ev.type;
		if (t == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			doc = json_null();
			goto out;
		}
		yaml_event_delete(&ev);
		if (t == YAML_DOCUMENT_START_EVENT)
			break;
	}
	r = next(&l, &ev);
	if (r >= 0)
		r = node(&l, &ev, &doc);
out:
	yaml_parser_delete(&l.parser);
	if (r < 0) {
		json_decref(doc);
		return r;
	}
	*ret = doc;
	return 0;
}

struct out {
	char *buf;
	size_t len, cap;
};

static int out_write(void *data, unsigned char *buffer, size_t size)
{
	struct out *o = data;

	if (o->len + size + 1 > o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 4096;
		while (cap < o->len + size + 1)
			cap *= 2;
		char *b = realloc(o->buf, cap);
		if (!b)
			return 0;
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, buffer, size);
	o->len += size;
	o->buf[o->len] = '\0';
	return 1;
}

static int emit(yaml_emitter_t *e, yaml_event_t *ev)
{
	return yaml_emitter_emit(e, ev) ? 0 : -EIO;
}

static int emit_scalar(yaml_emitter_t *e, const char *s, bool plain_ok)
{
	yaml_event_t ev;

	yaml_scalar_event_initialize(
		&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), plain_ok, !plain_ok,
		plain_ok ? YAML_ANY_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE);
	return emit(e, &ev);
}

static int emit_node(yaml_emitter_t *e, const json_t *v)
{
	yaml_event_t ev;
	char num[64];
	const char *key;
	json_t *x;
	size_t i;
	int r = 0;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
		r = emit(e, &ev);
		json_object_foreach ((json_t *)v, key, x) {
			if (r >= 0)
				r = emit_scalar(e, key, true);
			if (r >= 0)
				r = emit_node(e, x);
		}
		yaml_mapping_end_event_initialize(&ev);
		return r < 0 ? r : emit(e, &ev);
	case JSON_ARRAY:
		yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
		r = emit(e, &ev);
		json_array_foreach (v, i, x)
			if (r >= 0)
				r = emit_node(e, x);
		yaml_sequence_end_event_initialize(&ev);
		return r < 0 ? r : emit(e, &ev);
	case JSON_STRING: {
		/* A string that would load back as null, a boolean or a number must be quoted. */
		json_t *back = plain_scalar(json_string_value(v));
		bool plain = json_is_string(back) &&
			     strcmp(json_string_value(back), json_string_value(v)) == 0;
		json_decref(back);
		return emit_scalar(e, json_string_value(v), plain);
	}
	case JSON_INTEGER:
		(void)snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return emit_scalar(e, num, true);
	case JSON_REAL:
		(void)snprintf(num, sizeof(num), "%.17g", json_real_value(v));
		return emit_scalar(e, num, true);
	case JSON_TRUE: return emit_scalar(e, "true", true);
	case JSON_FALSE: return emit_scalar(e, "false", true);
	case JSON_NULL: return emit_scalar(e, "null", true);
	}
	return -EINVAL;
}

char *up_yaml_dump(const json_t *v)
{
	struct out o = {0};
	yaml_emitter_t e;
	yaml_event_t ev;
	int r;

	if (!yaml_emitter_initialize(&e))
		return NULL;
	yaml_emitter_set_output(&e, out_write, &o);
	yaml_emitter_set_unicode(&e, 1);
	yaml_emitter_set_width(&e, -1);
	yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
	r = emit(&e, &ev);
	if (r >= 0) {
		yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
		r = emit(&e, &ev);
	}
	if (r >= 0)
		r = emit_node(&e, v);
	if (r >= 0) {
		yaml_document_end_event_initialize(&ev, 1);
		r = emit(&e, &ev);
	}
	if (r >= 0) {
		yaml_stream_end_event_initialize(&ev);
		r = emit(&e, &ev);
	}
	yaml_emitter_delete(&e);
	if (r < 0) {
		free(o.buf);
		return NULL;
	}
	return o.buf;
}

void up_yaml_problem(up_yaml_found_fn found, void *ud, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	found(ud, n ? &n->start_mark : NULL, msg);
}

/* What the prescan found, said to the user. */
static void found_syntax(const yaml_parser_t *p, up_yaml_found_fn found, void *ud)
{
	char text[512];

	(void)snprintf(text, sizeof(text), "invalid YAML: %s%s%s", p->problem ? p->problem : "?",
		       p->context ? " " : "", p->context ? p->context : "");
	found(ud, &p->problem_mark, text);
}

static bool found_event(const yaml_event_t *ev, int docs, const char *kind, up_yaml_found_fn found,
			void *ud)
{
	char text[512];

	if (ev->type == YAML_ALIAS_EVENT)
		(void)snprintf(text, sizeof(text),
			       "YAML aliases (*name) are not supported in %s files; write the "
			       "value out",
			       kind);
	else if (ev->type == YAML_DOCUMENT_START_EVENT && docs > 1)
		(void)snprintf(text, sizeof(text),
			       "a %s file holds one YAML document; remove the second '---'", kind);
	else
		return false;
	found(ud, &ev->start_mark, text);
	return true;
}

bool up_yaml_prescan(const char *text, size_t len, const char *kind, up_yaml_found_fn found,
		     void *ud)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	int docs = 0;
	bool done = false, any = false;

	(void)yaml_parser_initialize(&parser);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	while (!done) {
		if (!yaml_parser_parse(&parser, &ev)) {
			found_syntax(&parser, found, ud);
			any = true;
			break;
		}
		if (ev.type == YAML_DOCUMENT_START_EVENT)
			docs++;
		any = found_event(&ev, docs, kind, found, ud);
		done = ev.type == YAML_STREAM_END_EVENT || any;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	return any;
}
