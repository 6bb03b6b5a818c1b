/* SPDX-License-Identifier: Apache-2.0 */
#include "session-state.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <openssl/evp.h>

#include "hex.h"
#include "fileio.h"

/* clang-format off */
static const char *const names[_UP_SESSION_STATE_MAX] = {
	[UP_SESSION_PREPARING] = "PREPARING",
	[UP_SESSION_BUILDING] = "BUILDING",
	[UP_SESSION_DEPLOYING] = "DEPLOYING",
	[UP_SESSION_STARTING] = "STARTING",
	[UP_SESSION_RUNNING] = "RUNNING",
	[UP_SESSION_EXITED] = "EXITED",
	[UP_SESSION_FAILED] = "FAILED",
	[UP_SESSION_STOPPED] = "STOPPED",
	[UP_SESSION_TEARDOWN] = "TEARDOWN",
	[UP_SESSION_GONE] = "GONE",
};

#define TO(s) (1u << UP_SESSION_##s)
#define ENDS (TO(FAILED) | TO(STOPPED))

/* moves[from] holds one bit per state `from` may move to. */
static const unsigned moves[_UP_SESSION_STATE_MAX] = {
	[UP_SESSION_PREPARING] = TO(BUILDING) | TO(DEPLOYING) | ENDS,
	[UP_SESSION_BUILDING] = TO(DEPLOYING) | ENDS,
	[UP_SESSION_DEPLOYING] = TO(STARTING) | ENDS,
	[UP_SESSION_STARTING] = TO(RUNNING) | TO(EXITED) | ENDS,
	[UP_SESSION_RUNNING] = TO(EXITED) | TO(GONE) | ENDS,
	[UP_SESSION_EXITED] = TO(TEARDOWN),
	[UP_SESSION_FAILED] = TO(TEARDOWN),
	[UP_SESSION_STOPPED] = TO(TEARDOWN),
	[UP_SESSION_TEARDOWN] = TO(GONE),
	[UP_SESSION_GONE] = 0,
};

#undef ENDS
#undef TO
/* clang-format on */

static bool valid(enum up_session_state s)
{
	return s >= 0 && s < _UP_SESSION_STATE_MAX;
}

const char *up_session_state_to_name(enum up_session_state s)
{
	return valid(s) ? names[s] : NULL;
}

enum up_session_state up_session_state_from_name(const char *name)
{
	if (!name)
		return _UP_SESSION_STATE_INVALID;
	for (int i = 0; i < _UP_SESSION_STATE_MAX; i++)
		if (streq(names[i], name))
			return (enum up_session_state)i;
	return _UP_SESSION_STATE_INVALID;
}

bool up_session_state_is_terminal(enum up_session_state s)
{
	return valid(s) && s >= UP_SESSION_EXITED;
}

bool up_session_state_is_starting(enum up_session_state s)
{
	return valid(s) && s < UP_SESSION_RUNNING;
}

bool up_session_state_can_move(enum up_session_state from, enum up_session_state to)
{
	return valid(from) && valid(to) && (moves[from] & (1u << to));
}

int up_session_id_new(char *id)
{
	return up_random_hex(id, UP_SESSION_ID_LEN / 2);
}

static bool lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr("0123456789abcdef", s[i]))
			return false;
	return true;
}

bool up_session_id_valid(const char *id)
{
	return id && strlen(id) == UP_SESSION_ID_LEN && lower_hex(id, UP_SESSION_ID_LEN);
}

#define MACHINE_ID_LEN 32

int up_owner_hash(const char *machine_id_path, uid_t uid, char *ret)
{
	_cleanup_(freep) char *text = NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	char input[MACHINE_ID_LEN + 24];
	size_t len;
	int n, r;

	r = up_read_file(machine_id_path ? machine_id_path : UP_MACHINE_ID_PATH, 256, &text, &len);
	if (r < 0)
		return r == -EFBIG ? -EBADMSG : r;
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	if (len != MACHINE_ID_LEN || !lower_hex(text, len))
		return -EBADMSG;
	n = snprintf(input, sizeof(input), "%s:%u", text, (unsigned)uid);
	if (n < 0 || (size_t)n >= sizeof(input))
		return -EIO;
	if (EVP_Digest(input, (size_t)n, md, &md_len, EVP_sha256(), NULL) != 1 ||
	    md_len < UP_OWNER_HASH_LEN / 2)
		return -EIO;
	up_hex(md, UP_OWNER_HASH_LEN / 2, ret);
	return 0;
}
