"""How iPFI's importance grows with the model's confidence alone: an online MLP on stationary
Agrawal and SEA streams (nothing changes), iPFI with cross-entropy and with the zero-one loss;
printed: the three largest importances at rows 4,000 and 12,000 and their ratio.

    python scripts/explain_loss_growth.py

Measured (torch 2.13 CPU, one thread): cross-entropy x1.77 (Agrawal `age`), x1.82 / x1.58
(SEA `x1` / `x0`); zero-one x1.08, x1.02 / x0.93. The drift report's default loss
(``torchstream run --report``) is therefore zero-one.
"""

import torch, time
from torchstream import OnlineClassifier, Prequential
from torchstream.explain import IncrementalPFI
from torchstream.models import MLP
from torchstream.streams import make_synthetic
from torchstream.sinks import History
torch.set_num_threads(1)
for name in ("agrawal", "sea"):
    stream = make_synthetic(name, n_samples=12000, seed=0)
    cols = list(stream.schema.columns)
    torch.manual_seed(0)
    learner = OnlineClassifier(MLP, lr=0.005, scale_inputs=True, seed=0)
    ex = {l: IncrementalPFI(None, l, len(cols), feature_names=cols, alpha=0.001, seed=0) for l in ("cross_entropy", "zero_one")}
    for l,e in ex.items(): e.name = f"ipfi_{l}"
    h = History()
    Prequential(learner, stream, batch_size=4, plugins=list(ex.values()), sinks=[h], log_every=50).run()
    for l in ex:
        tags=[t for t in h.tags if t.startswith(f"ipfi_{l}/")]
        def at(row):
            return {t.split('/')[1]: v for t in tags for s,v in zip(h.steps(t),h.values(t)) if s==row}
        a,b=at(4000),at(12000)
        top=sorted(b,key=lambda k:-abs(b[k]))[:3]
        print(name,l,{k:(round(a[k],3),round(b[k],3),round(b[k]/a[k],2) if a[k] else None) for k in top})
