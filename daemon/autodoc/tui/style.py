"""The pickers' one layout, as Textual CSS: the fields over the list on the
left, the file under the cursor on the right, the buttons beneath.

Below 100 columns (`-narrow`, an 80×24 terminal) the preview moves under the
list and takes 40 % of the height (at least 7 lines), and the fields lose
their spacing. Under NO_COLOR Textual renders in monochrome; the marks that
matter (matched words, the hit's span) are also bold, underlined or reversed
(render.py), and an unchecked stage box shows no X (search.py StageBox).

Runs on: the TUI's event loop (read once when the app starts).
"""

CSS = """
Screen { layout: vertical; }
#body { height: 1fr; }
#left { width: 1fr; min-width: 30; }
#right { width: 1fr; border-left: solid $primary-darken-2; padding: 0 0 0 1; }
#fields { height: auto; padding: 0 1; }
#fields Horizontal { height: auto; }
#fields Input { width: 1fr; }
#fields Select { width: 24; }
#fields Select.facet { width: 1fr; max-width: 40; }
#fields .label { width: auto; padding: 1 1 0 0; }
#fields Checkbox { width: auto; }
#status { height: auto; max-height: 2; padding: 0 1; color: $text-muted; }
#list { height: 1fr; border: round $primary-darken-1; text-wrap: nowrap; text-overflow: ellipsis; }
#list:focus { border: round $accent; }
#preview-title { height: 1; text-style: bold; background: $boost; padding: 0 1; }
#preview-scroll { height: 1fr; }
#preview { text-wrap: nowrap; text-overflow: ellipsis; }
#buttons { height: auto; padding: 0 1; }
#buttons Button { margin: 0 1 0 0; }
#progress { width: 1fr; height: 1; padding: 0 1; }
#progress.-idle { display: none; }

.-narrow #body { layout: vertical; }
.-narrow #right { width: 100%; height: 40%; min-height: 7; border-left: none; border-top: solid $primary-darken-2; padding: 0; }
.-narrow #fields Select { width: 18; }
.-narrow #status { max-height: 2; }
.-narrow #buttons Button { min-width: 8; }
"""
