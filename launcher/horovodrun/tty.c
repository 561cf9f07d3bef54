/* Reads the terminal's capabilities from terminfo (ncurses' low level). */
#include "launcher/horovodrun/tty.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <term.h>
#include <unistd.h>

/* Cyan, green, yellow, magenta, blue: no red, which reads as an error. */
static const int palette[HR_TTY_COLORS] = {6, 2, 3, 5, 4};

/* Copies a terminfo string without its padding ("$<5>"); "" when absent
 * or too long. */
static void keep(char *dst, const char *src)
{
    size_t n = 0;
    dst[0] = '\0';
    if (src == NULL || src == (const char *)-1)
        return;
    for (const char *p = src; *p; p++) {
        if (p[0] == '$' && p[1] == '<') {
            const char *end = strchr(p, '>');
            if (end) {
                p = end;
                continue;
            }
        }
        if (n + 1 >= HR_TTY_SEQ) {
            dst[0] = '\0';
            return;
        }
        dst[n++] = *p;
    }
    dst[n] = '\0';
}

/* Whether colours are wanted on fd under mode. */
static int want_color(int fd, int mode)
{
    if (mode != HR_COLOR_AUTO)
        return mode == HR_COLOR_ALWAYS;
    const char *no = getenv("NO_COLOR");
    return isatty(fd) && (no == NULL || no[0] == '\0');
}

static void init_colors(struct hr_tty *t, int loaded);

void hr_tty_init(struct hr_tty *t, int fd, int status, int mode)
{
    memset(t, 0, sizeof(*t));
    t->fd = fd;
    int color = want_color(fd, mode);
    int err = 0;
    int loaded = (status && isatty(fd)) || color
                     ? setupterm(NULL, fd, &err) == 0 /* OK */
                     : 0;
    if (loaded) {
        keep(t->up, tigetstr("cuu1"));
        keep(t->erase_eol, tigetstr("el"));
        t->redraw = status && isatty(fd) && t->up[0] && t->erase_eol[0];
    }
    if (color)
        init_colors(t, loaded);
    /* Every string it gave is copied: nothing else reads it. */
    if (loaded)
        del_curterm(cur_term);
}

/* The prefixes' colours: terminfo's, else ANSI's. */
static void init_colors(struct hr_tty *t, int loaded)
{
    const char *setaf = loaded ? tigetstr("setaf") : NULL;
    int usable =
        setaf != NULL && setaf != (char *)-1 && tigetnum("colors") >= 8;
    for (int i = 0; i < HR_TTY_COLORS; i++) {
        if (usable)
            keep(t->fg[i], tiparm(setaf, palette[i]));
        else
            snprintf(t->fg[i], HR_TTY_SEQ, "\033[3%dm", palette[i]);
    }
    if (usable)
        keep(t->reset, tigetstr("sgr0"));
    if (!usable || t->reset[0] == '\0')
        snprintf(t->reset, HR_TTY_SEQ, "\033[m");
    t->color = 1;
}

void hr_tty_size(const struct hr_tty *t, int *cols, int *rows)
{
    struct winsize ws;
    *cols = 80;
    *rows = 24;
    if (ioctl(t->fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        *cols = ws.ws_col;
        *rows = ws.ws_row;
    }
}

static size_t put(char *buf, size_t n, size_t cap, const char *s)
{
    size_t len = strlen(s);
    if (n + len <= cap) {
        memcpy(buf + n, s, len);
        n += len;
    }
    return n;
}

size_t hr_tty_erase(const struct hr_tty *t, int rows, char *buf, size_t cap)
{
    size_t n = put(buf, 0, cap, "\r");
    for (int i = 0; i < rows; i++) {
        if (i > 0)
            n = put(buf, n, cap, t->up);
        n = put(buf, n, cap, t->erase_eol);
    }
    return n;
}

size_t hr_tty_fit(const char *text, size_t len, int cols)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0, fits = 0;
    int used = 0;
    while (i < len) {
        if (s[i] == 0x1b) {
            /* CSI: ESC [ parameters, then a final byte in @..~. */
            size_t j = i + 1;
            if (j < len && s[j] == '[') {
                j++;
                while (j < len && (s[j] < 0x40 || s[j] > 0x7e))
                    j++;
                j++;
            }
            if (j > len)
                break;
            i = fits = j;
            continue;
        }
        if (s[i] < 0x20 || s[i] == 0x7f)
            break;
        /* One column per character: its lead byte and continuations. */
        if (used == cols)
            break;
        size_t j = i + 1;
        while (j < len && (s[j] & 0xc0) == 0x80)
            j++;
        used++;
        i = fits = j;
    }
    return fits;
}
