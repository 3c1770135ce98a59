# The mlse app, as on Hugging Face Spaces: runs as uid 1000 on port 7860.
FROM python:3.11-slim

RUN useradd -m -u 1000 user
WORKDIR /home/user/app

# torch==2.13.0 is pinned in requirements.txt: build where that CPU wheel is reachable (or pre-install it).
COPY --chown=user requirements.txt constraints.txt ./
RUN pip install --no-cache-dir -r requirements.txt -c constraints.txt

COPY --chown=user . .
USER user
# The datasets are not in the image: app.py fetches the missing ones from the hub at first start, in the background
# (FLORES+ is gated: give the Space a secret HF_TOKEN of an account that accepted its terms). With persistent storage
# on a Space, set MLSE_DATA=/data/mlse so that they are fetched once, not at every restart.
RUN mkdir -p /home/user/data
ENV HOME=/home/user \
    GRADIO_SERVER_NAME=0.0.0.0 \
    GRADIO_SERVER_PORT=7860 \
    MLSE_CACHE=/home/user/.cache/mlse \
    MLSE_DATA=/home/user/data
# The backend the app runs on (docker build --build-arg MLSE_BACKEND=onnx-int8); the warm below prepares its files.
ARG MLSE_BACKEND=torch
ENV MLSE_BACKEND=${MLSE_BACKEND}
# Warm start: compute into MLSE_CACHE what each tab shows first (me5-small converted, the backend's ONNX files, the
# example pairs' embeddings, UMAP's compiled kernels), so the first visitor does not wait for it. The datasets are
# usually not in the image (see above): the Gold, Tatoeba and Map steps are then skipped here, with the reason, and
# the app runs them in the background at first start, each tab saying "preparing (n %)" meanwhile. Copy the data into
# /home/user/data before this line to warm those at build too. A failed warm never fails the build: the app warms
# again at start.
RUN python -m mlse warm || true
EXPOSE 7860
CMD ["python", "app.py"]
