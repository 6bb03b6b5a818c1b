/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

/* An intrusive doubly-linked list, as in the Linux kernel and wayland. */
struct up_list {
	struct up_list *prev, *next;
};

#define up_container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

static inline void up_list_init(struct up_list *l)
{
	l->prev = l->next = l;
}

static inline int up_list_empty(const struct up_list *l)
{
	return l->next == l;
}

static inline void up_list_insert_tail(struct up_list *head, struct up_list *e)
{
	e->prev = head->prev;
	e->next = head;
	head->prev->next = e;
	head->prev = e;
}

static inline void up_list_remove(struct up_list *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = e;
}

#define up_list_for_each_safe(pos, tmp, head)                            \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
	     (pos) = (tmp), (tmp) = (pos)->next)
