"""Small utilities every wing uses: the one codec of model text (``textcodec``), the one
writer of whole files (``files``), the collector's pause (``gcpause``), every private read of
another library (``foreign``) and the "unknown key" wording (``config_keys``). They import
nothing of pytest-slam's own."""
