/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by rules.c (the set) and rules-parse.c (the YAML reader); nobody else. */
#include "rules.h"

/* Frees what a rule owns (not the struct) and zeroes it. */
void up_rule_done(struct up_rule *r);
/* Moves a validated rule into the set (compiling its regexes); *r is zeroed. */
int up_ruleset_take(struct up_ruleset *rs, struct up_rule *r) _wur_;
/* Marks that a user file asked for replace_defaults. */
void up_ruleset_set_replace_defaults(struct up_ruleset *rs);

/* 0, or -EINVAL with PCRE2's reason and offset in why. */
int up_regex_check(const char *re, char *why, size_t why_len) _wur_;
/* Parses an IP or CIDR (host bits cleared, bare IP = /32 or /128) into out. */
int up_cidr_normalize(const char *in, char *out, size_t out_len) _wur_;
/* A header name is an HTTP token. */
bool up_header_name_valid(const char *name);
/* An AWS action name as aws_allow_credential_actions lists it: letters and digits. */
bool up_aws_action_valid(const char *name);
