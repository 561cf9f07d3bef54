/* What horovodrun's terminal can do: moving up, erasing, colours, width. */
#ifndef HR_TTY_H
#define HR_TTY_H

#include <stddef.h>

/* --color */
enum hr_color {
    HR_COLOR_AUTO = 0, /* on a terminal, unless NO_COLOR is set */
    HR_COLOR_ALWAYS = 1,
    HR_COLOR_NEVER = 2
};

/* Longest control sequence kept (terminfo's strings are short). */
#define HR_TTY_SEQ 32
/* Distinct prefix colours. */
#define HR_TTY_COLORS 6

struct hr_tty {
    int fd;
    int redraw; /* the status block may be drawn: cursor up and erase */
    int color;  /* prefixes are coloured */
    char up[HR_TTY_SEQ];        /* one row up */
    char erase_eol[HR_TTY_SEQ]; /* to the end of the line */
    char fg[HR_TTY_COLORS][HR_TTY_SEQ];
    char reset[HR_TTY_SEQ];
};

/*
 * Looks at fd: when it is a terminal whose TERM's terminfo entry can move
 * the cursor up and erase a line, and status is set, redraw is set.
 * Colours follow mode (auto: on a terminal, unless NO_COLOR is set and not
 * empty), through terminfo's setaf, or ANSI codes when TERM has no entry
 * and mode is always.
 */
void hr_tty_init(struct hr_tty *t, int fd, int status, int mode);
/* Columns and rows of the terminal, or 80 by 24 when it does not say. */
void hr_tty_size(const struct hr_tty *t, int *cols, int *rows);
/* What hr_tty_erase may write for rows lines. */
#define HR_TTY_ERASE_MAX(rows) (2 + 2 * (rows)*HR_TTY_SEQ)
/*
 * Writes to buf (cap bytes at least HR_TTY_ERASE_MAX(rows)) what erases
 * the rows lines ending at the cursor, line by line from the last, and
 * leaves the cursor at the start of the first; returns the length. Never
 * "erase to the end of the screen": from the top-left corner some
 * terminals (tmux) take that for clearing the screen and keep the rows in
 * the scrollback, so every redraw would be kept.
 */
size_t hr_tty_erase(const struct hr_tty *t, int rows, char *buf, size_t cap);
/*
 * The bytes of text that fill at most cols columns, cutting between
 * UTF-8 characters, control sequences taking no column. Control
 * characters other than ESC end the text: the block's rows must not
 * move the cursor.
 */
size_t hr_tty_fit(const char *text, size_t len, int cols);

#endif
