/* Unit tests for launcher/horovodrun/tty.c: widths and erasing rows. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/horovodrun/tty.h"

Test(tty, fit_counts_characters_not_bytes)
{
    cr_expect_eq(hr_tty_fit("abcdef", 6, 4), 4);
    cr_expect_eq(hr_tty_fit("abc", 3, 10), 3);
    /* U+2588 (3 bytes) drawn by tqdm: two of them fill two columns. */
    const char *bar = "\xe2\x96\x88\xe2\x96\x88x";
    cr_expect_eq(hr_tty_fit(bar, strlen(bar), 2), 6);
    cr_expect_eq(hr_tty_fit(bar, strlen(bar), 1), 3);
    cr_expect_eq(hr_tty_fit("ab", 2, 0), 0);
}

Test(tty, fit_keeps_colours_and_stops_at_controls)
{
    const char *red = "\033[31mab\033[0m";
    cr_expect_eq(hr_tty_fit(red, strlen(red), 2), strlen(red));
    cr_expect_eq(hr_tty_fit(red, strlen(red), 1), 6);
    cr_expect_eq(hr_tty_fit("ab\tcd", 5, 10), 2);
    cr_expect_eq(hr_tty_fit("ab\033[3", 6, 10), 2, "a cut sequence");
}

/* Not a terminal: no redrawing, and colours only when asked for. */
Test(tty, pipe_draws_nothing)
{
    int fds[2];
    struct hr_tty t;
    cr_assert_eq(pipe(fds), 0);
    setenv("TERM", "xterm", 1);
    hr_tty_init(&t, fds[1], 1, HR_COLOR_AUTO);
    cr_expect_eq(t.redraw, 0);
    cr_expect_eq(t.color, 0);
    hr_tty_init(&t, fds[1], 1, HR_COLOR_ALWAYS);
    cr_expect_eq(t.color, 1);
    cr_expect_str_eq(t.fg[0], "\033[36m", "xterm's setaf 6");
    cr_expect_str_eq(t.fg[1], "\033[32m");
    setenv("TERM", "no-such-terminal", 1);
    hr_tty_init(&t, fds[1], 1, HR_COLOR_ALWAYS);
    cr_expect_str_eq(t.fg[0], "\033[36m", "ANSI without terminfo");
    cr_expect_str_eq(t.reset, "\033[m");
    close(fds[0]);
    close(fds[1]);
}

Test(tty, erase_rows)
{
    struct hr_tty t = {0};
    char buf[256];
    strcpy(t.up, "\033[A");
    strcpy(t.erase_eol, "\033[K");
    /* Line by line, never to the end of the screen (which tmux, from the
     * top-left corner, keeps in its scrollback). */
    size_t n = hr_tty_erase(&t, 3, buf, sizeof(buf));
    buf[n] = '\0';
    cr_expect_str_eq(buf, "\r\033[K\033[A\033[K\033[A\033[K");
    n = hr_tty_erase(&t, 2, buf, sizeof(buf));
    buf[n] = '\0';
    cr_expect_str_eq(buf, "\r\033[K\033[A\033[K");
}
