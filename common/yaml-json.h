/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>

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
