"""A bidirectional LSTM tags every token of sentences of different lengths: pad_sequence pads them,
pack_padded_sequence (enforce_sorted=False) hides the padding from the LSTM, pad_packed_sequence unpacks the
outputs, and the loss skips padded positions with ignore_index."""
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

torch.manual_seed(19)
vocab, tags, pad_tag = 12, 3, -100
lengths = [5, 2, 4, 3]
sentences = [torch.randint(1, vocab, (n,)) for n in lengths]
labels = [s % tags for s in sentences]  # the tag is a function of the word
words = pad_sequence(sentences, batch_first=True)  # (batch, longest), padded with 0
targets = pad_sequence(labels, batch_first=True, padding_value=pad_tag)
print("padded", tuple(words.shape), "targets row 1:", targets[1].tolist())


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, 8, padding_idx=0)
        self.lstm = nn.LSTM(8, 10, batch_first=True, bidirectional=True)
        self.out = nn.Linear(20, tags)

    def forward(self, words, lengths):
        packed = pack_padded_sequence(self.embed(words), torch.tensor(lengths), batch_first=True,
                                      enforce_sorted=False)
        outputs, (h_n, _) = self.lstm(packed)
        padded, out_lengths = pad_packed_sequence(outputs, batch_first=True)
        return self.out(padded), out_lengths, h_n


model = Tagger()
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
criterion = nn.CrossEntropyLoss(ignore_index=pad_tag)
for step in range(20):
    scores, out_lengths, h_n = model(words, lengths)
    loss = criterion(scores.reshape(-1, tags), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 5 == 4:
        print(f"step {step + 1}: loss {loss.item():.5f}")
print("unpacked lengths", out_lengths.tolist(), "final state", tuple(h_n.shape))
real = targets != pad_tag
print("token accuracy", round((scores.argmax(-1)[real] == targets[real]).float().mean().item(), 4))
print("scores", tuple(scores.shape), "padded positions alike:", torch.equal(scores[1, 2], scores[1, 4]))
