"""A tiny decoder-only transformer language model on characters: a fused q/k/v projection split into heads with
view/transpose, a causal mask kept as a buffer and applied with masked_fill(-inf), heads merged back with
transpose().contiguous().view(), GELU MLP blocks, weights initialised through Module.apply, random training
windows, a no_grad evaluation helper, and top-k sampling with torch.multinomial."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(22)
corpus = "to be or not to be, that is the question. " * 8
alphabet = sorted(set(corpus))
encode = {ch: i for i, ch in enumerate(alphabet)}
stream = torch.tensor([encode[ch] for ch in corpus])
cut = int(0.8 * len(stream))
splits = {"train": stream[:cut], "valid": stream[cut:]}
context, width, heads = 8, 24, 3


def windows(split, count=6):
    source = splits[split]
    starts = torch.randint(len(source) - context, (count,))
    inputs = torch.stack([source[s:s + context] for s in starts])
    targets = torch.stack([source[s + 1:s + 1 + context] for s in starts])
    return inputs, targets


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.drop = nn.Dropout(0.1)
        self.register_buffer("mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / (k.size(-1) ** 0.5)
        scores = scores.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        attended = self.drop(F.softmax(scores, dim=-1)) @ v
        return self.proj(attended.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = CausalSelfAttention()
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(len(alphabet), width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.Sequential(Block(), Block())
        self.ln = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, len(alphabet), bias=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        t = idx.size(1)
        h = self.blocks(self.tokens(idx) + self.positions(torch.arange(t)))
        logits = self.lm_head(self.ln(h))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


@torch.no_grad()
def evaluate(model):
    model.eval()
    result = {split: sum(model(*windows(split))[1].item() for _ in range(2)) / 2 for split in splits}
    model.train()
    return result


model = TinyGPT()
print("parameters:", sum(p.numel() for p in model.parameters()))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
for step in range(40):
    if step % 20 == 0:
        print(step, {k: round(v, 4) for k, v in evaluate(model).items()})
    inputs, targets = windows("train")
    _, loss = model(inputs, targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
print("last loss", round(loss.item(), 4))

model.eval()
with torch.no_grad():
    idx = torch.tensor([[encode["t"]]])
    for _ in range(12):
        logits = model(idx[:, -context:])[0][:, -1, :] / 0.8
        top, _ = torch.topk(logits, 5)
        logits[logits < top[:, [-1]]] = -float("inf")
        idx = torch.cat((idx, torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)), dim=1)
print("sample:", repr("".join(alphabet[i] for i in idx[0].tolist())))
