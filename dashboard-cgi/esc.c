// esc.c — escaping every string that reaches the page as HTML text and
// attributes, URL query values or Prometheus label values (JSON goes
// through common/jout.h).
// Bytes that are not valid UTF-8 become U+FFFD so that neither a browser
// nor a scraper sees a broken sequence.

#include "dashboard-cgi/dash.h"

#include "common/util.h"

#include <stddef.h>
#include <string.h>

// Calls put for each ASCII byte, and writes valid multibyte sequences as
// they are (U+FFFD for invalid bytes: util_utf8_length, the rule of
// util_utf8_sanitize and of every JSON pivfarm writes).
static void
s_escape (FILE *out, const char *text, void (*put) (FILE *, unsigned char))
{
    const unsigned char *s = (const unsigned char *) (text ? text : "");
    size_t n = strlen ((const char *) s);
    while (n > 0) {
        int len = util_utf8_length (s, n);
        if (len == 1)
            put (out, *s);
        else if (len > 1)
            fwrite (s, 1, (size_t) len, out);
        else
            fputs ("\xEF\xBF\xBD", out);
        s += len ? len : 1;
        n -= len ? (size_t) len : 1;
    }
}

static void
s_put_html_byte (FILE *out, unsigned char c)
{
    switch (c) {
    case '&': fputs ("&amp;", out); break;
    case '<': fputs ("&lt;", out); break;
    case '>': fputs ("&gt;", out); break;
    case '"': fputs ("&quot;", out); break;
    case '\'': fputs ("&#39;", out); break;
    default:
        if (c < 0x20 && c != '\n' && c != '\t')
            fputs ("\xEF\xBF\xBD", out);  // control characters have no place on a page
        else
            fputc (c, out);
    }
}

void
dash_put_html (FILE *out, const char *text)
{
    s_escape (out, text, s_put_html_byte);
}

static void
s_put_prom_byte (FILE *out, unsigned char c)
{
    switch (c) {
    case '\\': fputs ("\\\\", out); break;
    case '"': fputs ("\\\"", out); break;
    case '\n': fputs ("\\n", out); break;
    default:
        if ((c < 0x20 && c != '\t') || c == 0x7F)
            fputs ("\xEF\xBF\xBD", out);  // a scraper's line must stay one line
        else
            fputc (c, out);
    }
}

void
dash_put_prom_label (FILE *out, const char *text)
{
    s_escape (out, text, s_put_prom_byte);
}

void
dash_put_query_value (FILE *out, const char *text)
{
    for (const unsigned char *s = (const unsigned char *) text; *s; s++)
        if ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')
            || strchr ("-._~", *s))
            fputc (*s, out);
        else
            fprintf (out, "%%%02X", *s);
}
