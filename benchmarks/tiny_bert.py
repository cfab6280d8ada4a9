"""A tiny BERT-like model on real PyTorch: embeddings, 2 encoder layers written out (attention, layer norm, GELU
feed-forward), a masked-token head; two training steps."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
VOCAB, DIM, HEADS, LAYERS, SEQ = 50, 32, 4, 2, 12


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.out = nn.Linear(DIM, DIM)

    def forward(self, x, mask):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(DIM // HEADS) + mask
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, DIM))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attention()
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.ff1, self.ff2 = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

    def forward(self, x, mask):
        x = self.norm1(x + self.attention(x, mask))
        return self.norm2(x + self.ff2(F.gelu(self.ff1(x))))


class TinyBert(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(VOCAB, DIM), nn.Embedding(SEQ, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids, padding):
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
        mask = (padding[:, None, None, :] * -1e9)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(x)


model = TinyBert()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.randint(0, VOCAB, (2, SEQ))
padding = torch.zeros(2, SEQ)
padding[1, -3:] = 1
targets = ids.clone()
for _ in range(2):
    logits = model(ids, padding)
    loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
