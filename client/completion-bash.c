/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bash and zsh (and, in completion-shells.c, fish) completion scripts. Each is a fixed
 * engine plus the command table's model printed as data: per command, its options, the
 * kind of value each one takes, and its positional arguments. Words known only at
 * completion time come from `uplink completion --words sessions` and kubectl's contexts,
 * each under `timeout` so that a completion never hangs.
 */
#include <errno.h>
#include <string.h>

#include "completion.h"
#include "config.h"

/* A value kind as the scripts spell it: file, dir, session, agent, context, none, or a,b,c. */
const char *comp_kind_word(const struct comp_value *v)
{
	return v->kind == COMP_CHOICE ? v->choices : comp_kind_name(v->kind);
}

/* The distinct first words, space-separated. */
void comp_print_first_words(FILE *f, const struct comp_cmd *cmds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		for (size_t j = 0; j < i; j++)
			seen |= streq(cmds[j].first, cmds[i].first);
		if (!seen)
			fprintf(f, "%s%s", i ? " " : "", cmds[i].first);
	}
}

void comp_print_subs_of(FILE *f, const struct comp_cmd *cmds, size_t n, const char *first)
{
	bool any = false;

	for (size_t i = 0; i < n; i++)
		if (streq(cmds[i].first, first) && *cmds[i].sub) {
			fprintf(f, "%s%s", any ? " " : "", cmds[i].sub);
			any = true;
		}
}

bool comp_has_subs(const struct comp_cmd *cmds, size_t n, const char *first)
{
	for (size_t i = 0; i < n; i++)
		if (streq(cmds[i].first, first) && *cmds[i].sub)
			return true;
	return false;
}

static void print_subs(FILE *f, const struct comp_cmd *cmds, size_t n, const struct comp_syntax *sx)
{
	fputs(sx->subs_head, f);
	for (size_t i = 0; i < n; i++) {
		bool first_seen = false;
		for (size_t j = 0; j < i; j++)
			first_seen |= streq(cmds[j].first, cmds[i].first);
		if (first_seen || !comp_has_subs(cmds, n, cmds[i].first))
			continue;
		fprintf(f, "%s%s%s", sx->sub_open, cmds[i].first, sx->sub_mid);
		comp_print_subs_of(f, cmds, n, cmds[i].first);
		fputs(sx->sub_close, f);
	}
	fprintf(f, "\tesac\n}\n\n");
}

static void print_spec(FILE *f, const struct comp_cmd *c, const struct comp_syntax *sx)
{
	fprintf(f, "%s%s%s%s%s", sx->spec_open, c->first, *c->sub ? " " : "", c->sub, sx->opts);
	for (size_t i = 0; i < c->n_opts; i++)
		fprintf(f, "%s%s", i ? " " : "", c->opts[i].name);
	fputs(sx->vals, f);
	for (size_t i = 0, k = 0; i < c->n_opts; i++)
		if (c->opts[i].takes_value)
			fprintf(f, "%s%s=%s", k++ ? " " : "", c->opts[i].name,
				comp_kind_word(&c->opts[i].value));
	fputs(sx->pos, f);
	for (size_t i = 0; i < c->n_pos; i++)
		fprintf(f, "%s%s", i ? " " : "", comp_kind_word(&c->pos[i]));
	fprintf(f, "%s%s' ;;\n", sx->rep, c->pos_repeats ? "1" : "");
}

static const char bash_engine[] =
	"_uplink_candidates() {\n"
	"\tlocal i kc=()\n"
	"\tcase $1 in\n"
	"\tsession | agent)\n"
	"\t\tcommand timeout 3 \"${COMP_WORDS[0]/#\\~/$HOME}\" completion --words \"${1}s\" "
	"2>/dev/null ;;\n"
	"\tcontext)\n"
	"\t\tfor ((i = 1; i + 1 < ${#COMP_WORDS[@]}; i++)); do\n"
	"\t\t\t[ \"${COMP_WORDS[i]}\" = --kubeconfig ] && kc=(--kubeconfig \"${COMP_WORDS[i + "
	"1]}\")\n"
	"\t\tdone\n"
	"\t\tcommand timeout 3 kubectl \"${kc[@]}\" config get-contexts -o name 2>/dev/null ;;\n"
	"\t*,*) (IFS=,; printf '%s\\n' $1) ;;\n"
	"\tesac\n"
	"}\n\n"
	"_uplink_value() {\n"
	"\tlocal cur=${COMP_WORDS[COMP_CWORD]} IFS=$'\\n'\n"
	"\tcase $1 in\n"
	"\tnone | '') ;;\n"
	"\tfile) compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -f -- \"$cur\")) ;;\n"
	"\tdir) compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -d -- \"$cur\")) ;;\n"
	"\t*) COMPREPLY+=($(compgen -W \"$(_uplink_candidates \"$1\")\" -- \"$cur\")) ;;\n"
	"\tesac\n"
	"}\n\n"
	"_uplink_kind_of() {\n"
	"\tlocal v\n"
	"\tfor v in $_u_vals; do\n"
	"\t\t[ \"${v%%=*}\" = \"$1\" ] && { printf '%s\\n' \"${v#*=}\"; return 0; }\n"
	"\tdone\n"
	"\treturn 1\n"
	"}\n\n"
	"_uplink_args() {\n"
	"\tlocal cur=${COMP_WORDS[COMP_CWORD]} i=$2 n=0 w kind pos\n"
	"\tlocal _u_opts _u_vals _u_pos _u_rep\n"
	"\t_uplink_spec \"$1\" || return 0\n"
	"\tfor ((; i < COMP_CWORD; i++)); do\n"
	"\t\tw=${COMP_WORDS[i]}\n"
	"\t\tcase $w in\n"
	"\t\t--) return 0 ;;\n"
	"\t\t-*) _uplink_kind_of \"$w\" >/dev/null && i=$((i + 1)) ;;\n"
	"\t\t*) n=$((n + 1)) ;;\n"
	"\t\tesac\n"
	"\tdone\n"
	"\tif [ \"$i\" -gt \"$COMP_CWORD\" ]; then\n"
	"\t\t_uplink_value \"$(_uplink_kind_of \"${COMP_WORDS[COMP_CWORD - 1]}\")\"\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\tif [[ $cur == -* ]]; then\n"
	"\t\tCOMPREPLY+=($(compgen -W \"$_u_opts\" -- \"$cur\"))\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\tpos=($_u_pos)\n"
	"\tif [ \"$n\" -lt \"${#pos[@]}\" ]; then\n"
	"\t\tkind=${pos[n]}\n"
	"\telif [ -n \"$_u_rep\" ] && [ \"${#pos[@]}\" -gt 0 ]; then\n"
	"\t\tkind=${pos[${#pos[@]} - 1]}\n"
	"\tfi\n"
	"\t_uplink_value \"$kind\"\n"
	"}\n\n"
	"_uplink() {\n"
	"\tlocal cur=${COMP_WORDS[COMP_CWORD]} key=${COMP_WORDS[1]} subs\n"
	"\tCOMPREPLY=()\n"
	"\tif [ \"$COMP_CWORD\" -le 1 ]; then\n"
	"\t\tCOMPREPLY=($(compgen -W \"$_uplink_commands -h --help -V --version\" -- \"$cur\"))\n"
	"\t\treturn 0\n"
	"\tfi\n"
	"\tsubs=$(_uplink_subs \"$key\")\n"
	"\tif [ \"$COMP_CWORD\" -eq 2 ] && [ -n \"$subs\" ]; then\n"
	"\t\tCOMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
	"\tfi\n"
	"\tif [ -n \"$subs\" ] && [ \"$COMP_CWORD\" -gt 2 ] && [[ \" $subs \" == *\" "
	"${COMP_WORDS[2]} \"* ]]; then\n"
	"\t\t_uplink_args \"$key ${COMP_WORDS[2]}\" 3\n"
	"\telse\n"
	"\t\t_uplink_args \"$key\" 2\n"
	"\tfi\n"
	"\treturn 0\n"
	"}\n\n"
	"complete -F _uplink uplink\n";

static int print_script(FILE *f, const struct comp_cmd *cmds, size_t n,
			const struct comp_syntax *sx)
{
	fprintf(f, "%s%s", sx->head, sx->words_open);
	comp_print_first_words(f, cmds, n);
	fputs(sx->words_close, f);
	print_subs(f, cmds, n, sx);
	fprintf(f, "_uplink_spec() {\n\tcase $1 in\n");
	for (size_t i = 0; i < n; i++)
		print_spec(f, &cmds[i], sx);
	fprintf(f, "%s\n\tesac\n}\n\n%s", sx->spec_default, sx->engine);
	return ferror(f) ? -EIO : 0;
}

static const char bash_head[] =
	"# bash completion for uplink " UPLINK_VERSION ", printed by `uplink completion bash` from "
	"its\n"
	"# command table. Install it where bash-completion looks:\n"
	"#   uplink completion bash > "
	"\"${XDG_DATA_HOME:-$HOME/.local/share}/bash-completion/completions/uplink\"\n"
	"# or, for this shell only:  source <(uplink completion bash)\n\n";

/* head, words_open, words_close; subs_head, sub_open, sub_mid, sub_close; spec_open, opts,
 * vals, pos, rep, spec_default; engine */
static const struct comp_syntax bash_syntax = {bash_head,
					       "_uplink_commands='",
					       "'\n\n",
					       "_uplink_subs() {\n\tcase $1 in\n",
					       "\t",
					       ") echo '",
					       "' ;;\n",
					       "\t'",
					       "')\n\t\t_u_opts='",
					       "'\n\t\t_u_vals='",
					       "'\n\t\t_u_pos='",
					       "' _u_rep='",
					       "\t*) return 1 ;;",
					       bash_engine};
static const struct comp_syntax zsh_syntax = {comp_zsh_head,
					      "_uplink_commands=(",
					      ")\n\n",
					      "_uplink_subs() {\n\treply=()\n\tcase $1 in\n",
					      "\t(",
					      ") reply=(",
					      ") ;;\n",
					      "\t('",
					      "')\n\t\tu_opts=(",
					      ")\n\t\tu_vals=(",
					      ")\n\t\tu_pos=(",
					      ") u_rep='",
					      "\t(*) return 1 ;;",
					      comp_zsh_engine};

int comp_print_bash(FILE *f, const struct comp_cmd *cmds, size_t n)
{
	return print_script(f, cmds, n, &bash_syntax);
}

int comp_print_zsh(FILE *f, const struct comp_cmd *cmds, size_t n)
{
	return print_script(f, cmds, n, &zsh_syntax);
}
