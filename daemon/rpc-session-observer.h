/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "session.h"

struct up_request;

/* What a session tells the client that sent session.start (session.h's observer; the
 * starter is that request): notifications on its connection, then the request's answer. */
extern const struct up_session_observer up_rpc_start_observer;
/* The request's cancel hook: its client leaving tells the session (up_session_starter_gone). */
void up_rpc_start_watch(struct up_request *req, struct up_session *s);
