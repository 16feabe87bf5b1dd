/*
 * xml.c - moeinf_xml_text (svg.h): the one escaper of text written into SVG files, used by the
 * trace heatmap and by the plot of a simulator sweep.
 */
#include "app/svg.h"

/* The entity of a character XML reserves in text and quoted attributes, or NULL. */
static const char *entity(char c) {
    switch (c) {
    case '&':
        return "&amp;";
    case '<':
        return "&lt;";
    case '>':
        return "&gt;";
    case '"':
        return "&quot;";
    case '\'':
        return "&apos;";
    default:
        return NULL;
    }
}

void moeinf_xml_text(FILE *out, const char *s) {
    for (; *s; s++) {
        const char *e = entity(*s);
        if (e)
            fputs(e, out);
        else
            fputc(*s, out);
    }
}
