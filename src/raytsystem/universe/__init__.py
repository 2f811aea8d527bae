"""Knowledge Universe: the evidence graph of a generation in a browser.

`api.UniverseApi` answers the questions the page asks (graph, node details with the full
evidence chain, search) through the service layer (`raytsystem.api.Session`); `page.render_page` writes one self-contained HTML file with the graph
embedded; `server.serve` serves the page and the JSON API on 127.0.0.1 only.
"""
