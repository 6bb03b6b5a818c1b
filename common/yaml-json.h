/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "util.h"

/*
 * YAML documents as jansson trees: the one place that walks libyaml's events.
 * Plain scalars resolve as YAML 1.2's core schema does (null, true/false, integers,
 * floats); quoted ones stay strings. Anchors and aliases are refused (kubeconfigs
 * and templates never need them, and aliases are a classic memory bomb). The first
 * document is returned. On failure, `err` reads "line L, column C: what".
 */
int up_yaml_load(const char *text, size_t len, json_t **ret, char *err, size_t err_len) _wur_;

/*
 * A jansson tree as YAML (block style, keys in their order). Strings that would read
 * as another type are quoted. Returns a NUL-terminated string the caller frees, or NULL.
 */
char *up_yaml_dump(const json_t *v);

/*
 * How a plain scalar resolves under the core schema, for the readers that walk libyaml's
 * document API themselves (config files, rules): null is "", "~", "null", "Null" or
 * "NULL"; a quoted scalar is never null nor a boolean. A NULL node counts as null.
 */
bool up_yaml_node_is_null(const yaml_node_t *n);
/* 1 true, 0 false, -1 not a boolean (quoted, another word, or holding a NUL byte). */
int up_yaml_node_boolean(const yaml_node_t *n);

/*
 * The pass before a document API reader (config files, rules) loads a text: the first of a
 * syntax error, an alias or a second document, worded for a `kind` of file ("config",
 * "rules") and reported to `found` with where it is. Returns whether it found one.
 */
typedef void (*up_yaml_found_fn)(void *ud, const yaml_mark_t *at, const char *what);
bool up_yaml_prescan(const char *text, size_t len, const char *kind, up_yaml_found_fn found,
		     void *ud);
/* A parser's own problem at node `n` (NULL: the top of the file), formatted and reported to
 * `found` as the prescan reports its findings. */
_printf_(4, 5) void up_yaml_problem(up_yaml_found_fn found, void *ud, const yaml_node_t *n,
				    const char *fmt, ...);
