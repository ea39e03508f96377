"""What the course shows of a run: the heatmaps and timelines (:mod:`.plots`), how a figure becomes a stamped PNG
of a legible size (:mod:`.figures`), the HTML page made for a projector (:mod:`.page`), and the screen's verdict per
crash point for agents that stream (:mod:`.screen`), and the demo (:mod:`.demo`) with its terminal summary
(:mod:`.terminal`). The page and the terminal count with the same :func:`tally`, so they always say
the same thing."""

from crashlab.report.page import PAGE_PX, Tally, agent_title, headline, lead_text, lesson_number, sections_with_lessons, \
    tally, timeline_images, verdict, write_report
from crashlab.report.plots import (AGENTS_PER_IMAGE, CLEAN, FAILURE, MEASURE_WORDS, MEASURES, heatmap_cell,
                                   lesson_heatmap, short_name)

__all__ = ["AGENTS_PER_IMAGE", "CLEAN", "FAILURE", "MEASURES", "MEASURE_WORDS", "PAGE_PX", "Tally", "agent_title",
           "headline", "heatmap_cell", "lead_text", "lesson_heatmap", "lesson_number", "sections_with_lessons", "short_name", "tally",
           "timeline_images", "verdict", "write_report"]
