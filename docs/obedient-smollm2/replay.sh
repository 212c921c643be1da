#!/usr/bin/env bash
# The SmolLM2 adapter's training run of issue #28, leg by leg (docs/obedient-smollm2/README.md):
# the legs' commands as card_openings.json records them, each with --leg-only, so that every leg
# trains and writes its checkpoint in OUT.work and nothing is saved or measured: the test sets
# stay unread. The checkpoint says how far the run got; legs it has passed are skipped, and a leg
# it stopped inside continues exactly (the same --steps, so the same learning-rate schedule).
# After the last leg: the validation check (validation_check.py), and only if it passes the test
# look (the last leg's command without --leg-only and with --out harness/assets/demo-obedient-smollm2).
#
# usage, from the repository root after `make real-models`:
#   bash docs/obedient-smollm2/replay.sh OUT [LAST_STEP]      (LAST_STEP: 120, 240, ..., 800; default 800)
# About 10 s a step on two CPU cores (2 h 20 min for 800 steps, with the held-out evaluations).
set -euo pipefail
out=${1:?usage: replay.sh OUT [LAST_STEP]}
last=${2:-800}
harness=${HARNESS:-.venv/bin/harness}
python=${PYTHON:-.venv/bin/python}
ckpt="$out.work/checkpoint.pt"

fixed=(--corpus ../shared/data/stories/tinystories_subset.txt --init-from model:smollm2-135m-instruct-q4_1
  --lora-rank 8 --directives --unquoted-targets --copy-fraction 0 --curriculum 0 --copy-warmup 0
  --max-context-tokens 140 --plain-len 160 --batch-size 4 --seq-len 256 --warmup-steps 10 --eval-every 40
  --valid-text ../shared/data/stories/tinystories_valid_head.txt --nonce-prob 0.5 --synth-fraction 0.9
  --phrasing-grammar 0.7 --prohibition-share 0.45 --paired-prohibitions --counterfactual-rows
  --directive-share 0.25 --mention-share 0.15 --unlikelihood-weight 100 --unlikelihood-window 32 --lr 1e-3
  --eval-lengths 32,64,128 --synthetic-eval-pairs 8 --eval-prompt-limit 6 --valid-paragraphs 400
  --baseline model:smollm2-135m-instruct-q4_1 --threads 2)
# The monitor (--probe-pairs) draws nothing from the training rows (each step's rows are seeded
# by the step alone), so every leg runs without it: it only costs time.
slow=(--clause-pairs 0.5 --directive-share 0.3 --prohibition-share 0.4)
legs=(
  "120|"
  "240|"
  "320|--lr 3e-3 --clause-pairs 0.4"
  "400|--lr 3e-3 --clause-pairs 0.4 --directive-share 0.35 --prohibition-share 0.35"
  "480|${slow[*]}" "560|${slow[*]}" "640|${slow[*]}" "720|${slow[*]}" "800|${slow[*]}"
)

reached() {  # the step of the checkpoint in OUT.work, 0 without one
  if [ -f "$ckpt" ]; then
    "$python" -c "import sys, torch; print(torch.load(sys.argv[1], weights_only=True)['step'])" "$ckpt"
  else
    echo 0
  fi
}

for leg in "${legs[@]}"; do
  steps=${leg%%|*}
  read -r -a extra <<< "${leg#*|}"
  [ "$steps" -le "$last" ] || break
  at=$(reached)
  if [ "$at" -ge "$steps" ]; then
    echo "leg to step $steps: done (checkpoint at step $at)"
    continue
  fi
  resume=()
  [ "$at" -gt 0 ] && resume=(--resume)
  echo "leg to step $steps: from step $at"
  "$harness" train-demo "${fixed[@]}" --steps "$steps" --out "$out" "${resume[@]}" "${extra[@]}" \
    --probe-pairs 0 --leg-only
done
echo "checkpoint at step $(reached) in $ckpt"
