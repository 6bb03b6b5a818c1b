/* SPDX-License-Identifier: Apache-2.0 */
#include "yaml-json.h"

#include <errno.h>
#include <math.h>
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

static json_t *plain_scalar(const char *s)
{
	char *end;

	if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"))
		return json_null();
	if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
		return json_true();
	if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
		return json_false();
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
			(void)snprintf(what, sizeof(what), "duplicate key '%.100s'", json_string_value(key));
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
		bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag;
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
	case YAML_ALIAS_EVENT:
		r = fail(l, &mark, "aliases (*name) are not supported");
		break;
	default:
		r = fail(l, &mark, "unexpected YAML structure");
		break;
	}
	yaml_event_delete(ev);
	return r;
}

int up_yaml_load(const char *text, size_t len, json_t **ret, char *err, size_t err_len)
{
	struct loader l = { .err = err, .err_len = err_len };
	yaml_event_t ev;
	json_t *doc = NULL;
	int r;

	if (len > UP_MAX_YAML_SIZE)
		return snprintf(err, err_len, "the document is over %d bytes", UP_MAX_YAML_SIZE), -EFBIG;
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
