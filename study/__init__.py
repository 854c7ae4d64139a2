"""Judging a study (compare.py): from run folders, each scored by evaluation/ (one model), to the tables,
findings and plots comparing configurations over seeds; training/ and evaluation/ never import it.
Between its layers pass frozen records (records.py; terms.py: its terms as values). Its layers, each a
package, in import order (a layer imports only those before it; tests/test_layers.py holds it):
- stats: the statistics, pure functions of numbers;
- read: every file, stored output and git fact read into records, grouped into configurations (study:
  the whole study in one call);
- judge: the rows tested over seeds and worded by the family's rule; beside it, simulate: the rules
  simulated;
- pages: the text and plots of a study (serialize: the JSON and CSV files);
- run.py: the recipe on top (compare.py's one call): read -> judge -> pages."""
