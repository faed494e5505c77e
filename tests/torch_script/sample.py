"""Sample from a model trained by train.py, in the shape of nanoGPT's sample.py."""
import os
import pickle

import torch

from model import GPTConfig, GPT, setup_precision

out_dir = 'out'
data_dir = os.path.join('data', 'chars')
start = "\n"
num_samples = 2
max_new_tokens = 20
temperature = 0.8
top_k = 10
seed = 1337
device = 'cpu'
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'
compile = False
exec(open('configurator.py').read())

torch.manual_seed(seed)
torch.cuda.manual_seed(seed)
device_type, ctx = setup_precision(device, dtype)

checkpoint = torch.load(os.path.join(out_dir, 'ckpt.pt'), map_location=device)
model = GPT(GPTConfig(**checkpoint['model_args']))
state_dict = checkpoint['model']
unwanted_prefix = '_orig_mod.'
for k in list(state_dict.keys()):
    if k.startswith(unwanted_prefix):
        state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
model.load_state_dict(state_dict)
model.eval()
model.to(device)
if compile:
    model = torch.compile(model)

with open(os.path.join(data_dir, 'meta.pkl'), 'rb') as f:
    meta = pickle.load(f)
stoi, itos = meta['stoi'], meta['itos']
encode = lambda s: [stoi[c] for c in s]
decode = lambda ids: ''.join(itos[i] for i in ids)

x = torch.tensor(encode(start), dtype=torch.long, device=device)[None, ...]
samples = []
with torch.no_grad():
    with ctx:
        for k in range(num_samples):
            y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k)
            samples.append(decode(y[0].tolist()))
            print(samples[-1])
            print('---------------')
