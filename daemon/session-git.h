/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "util.h"

/*
 * The session's git overlay: the file the agent image's /etc/gitconfig includes from
 * /etc/gitconfig.d/agent-uplink.inc. The image itself rewrites github.com, gitlab.com and
 * bitbucket.org SSH URLs to HTTPS (agents/common/gitconfig).
 */

/* A --git-https-rewrite host: [A-Za-z0-9.-]+ with an optional :port. */
bool session_git_host_ok(const char *host);

/* Threadpool: the overlay for `hosts` plus, when `identity`, the host user's user.name and
 * user.email (`git config --global`); *ret NULL when there is nothing to say. */
int session_git_overlay(const json_t *hosts, bool identity, char **ret, json_t *warnings) _wur_;
