"""The Spec Arena web app (Gradio): `python -m demo`. UI only: every model runs in spec."""

import os

# Before gradio / huggingface_hub are imported (any demo module imports them): they read these at import.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
