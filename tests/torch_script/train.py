"""Train the GPT of model.py on a character-level corpus, in the shape of nanoGPT's train.py:
configurator overrides, an optional DDP run (torchrun), mixed precision, torch.compile,
gradient accumulation, a cosine learning-rate schedule, checkpoints and resuming.

    python train.py --max_iters=100
    torchrun --standalone --nproc_per_node=2 train.py --backend=gloo
"""
import math
import os
import time

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group
from torch.utils.data import DataLoader, Dataset

from model import GPTConfig, GPT, setup_precision

# ---------------------------------------------------------------------- defaults
out_dir = 'out'
data_dir = os.path.join('data', 'chars')
eval_interval = 2
log_interval = 1
eval_iters = 2
eval_only = False
always_save_checkpoint = True
save_init = False          # also write the checkpoint of the untrained model (iteration 0)
init_from = 'scratch'      # 'scratch' or 'resume' (from out_dir/ckpt.pt)
gradient_accumulation_steps = 2
batch_size = 4
block_size = 16
vocab_size = 32
n_layer = 2
n_head = 2
n_embd = 16
dropout = 0.0
bias = True
learning_rate = 1e-3
max_iters = 4
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0
decay_lr = True
warmup_iters = 2
lr_decay_iters = 8
min_lr = 1e-4
backend = 'gloo'
device = 'cpu'
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float32'
compile = False
seed = 1337
config_keys = [k for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float, bool, str))]
exec(open('configurator.py').read())
config = {k: globals()[k] for k in config_keys}

# ---------------------------------------------------------------------- processes, devices
ddp = int(os.environ.get('RANK', -1)) != -1
if ddp:
    init_process_group(backend=backend)
    ddp_rank = int(os.environ['RANK'])
    ddp_local_rank = int(os.environ['LOCAL_RANK'])
    ddp_world_size = int(os.environ['WORLD_SIZE'])
    if device.startswith('cuda'):
        device = f'cuda:{ddp_local_rank}'
        torch.cuda.set_device(device)
    master_process = ddp_rank == 0
    seed_offset = ddp_rank
    assert gradient_accumulation_steps % ddp_world_size == 0
    gradient_accumulation_steps //= ddp_world_size
else:
    master_process, seed_offset, ddp_world_size = True, 0, 1
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
print(f"tokens per iteration: {tokens_per_iter:,}")
if master_process:
    os.makedirs(out_dir, exist_ok=True)
torch.manual_seed(seed + seed_offset)
device_type, ctx = setup_precision(device, dtype)


# ---------------------------------------------------------------------- data
def get_batch(split, k):
    """Micro-batch number k of a split. Its rows start at offsets drawn from a generator
    seeded by (seed, rank, k), so a resumed run draws the batches it would have drawn."""
    data = np.memmap(os.path.join(data_dir, f'{split}.bin'), dtype=np.uint16, mode='r')
    ix = np.random.default_rng([seed, seed_offset, k]).integers(0, len(data) - block_size, batch_size)
    x = torch.from_numpy(np.stack([data[i:i + block_size].astype(np.int64) for i in ix]))
    y = torch.from_numpy(np.stack([data[i + 1:i + 1 + block_size].astype(np.int64) for i in ix]))
    if device_type == 'cuda':
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y


class Windows(Dataset):
    """A split cut into consecutive windows of block_size + 1 tokens (input, target)."""

    def __init__(self, split):
        self.data = np.memmap(os.path.join(data_dir, f'{split}.bin'), dtype=np.uint16, mode='r')

    def __len__(self):
        return (len(self.data) - 1) // block_size

    def __getitem__(self, i):
        chunk = self.data[i * block_size:(i + 1) * block_size + 1].astype(np.int64)
        return chunk[:-1], chunk[1:]


# ---------------------------------------------------------------------- model
iter_num = 0
best_val_loss = 1e9
model_args = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size,
                  bias=bias, vocab_size=vocab_size, dropout=dropout)
if init_from == 'scratch':
    print("a new model from scratch")
    model = GPT(GPTConfig(**model_args))
elif init_from == 'resume':
    print(f"resuming from {out_dir}")
    checkpoint = torch.load(os.path.join(out_dir, 'ckpt.pt'), map_location=device)
    for k in ['n_layer', 'n_head', 'n_embd', 'block_size', 'bias', 'vocab_size']:
        model_args[k] = checkpoint['model_args'][k]
    model = GPT(GPTConfig(**model_args))
    state_dict = checkpoint['model']
    unwanted_prefix = '_orig_mod.'  # what a compiled model's state_dict adds
    for k in list(state_dict.keys()):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
    model.load_state_dict(state_dict)
    iter_num = checkpoint['iter_num']
    best_val_loss = checkpoint['best_val_loss']
if block_size < model.config.block_size:
    model.crop_block_size(block_size)
    model_args['block_size'] = block_size
model.to(device)
print(f"number of parameters: {model.get_num_params() / 1e6:.2f}M")

scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
if init_from == 'resume':
    optimizer.load_state_dict(checkpoint['optimizer'])
checkpoint = None  # free the memory

if compile:
    print("compiling the model...")
    unoptimized_model = model
    model = torch.compile(model)
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank] if device_type == 'cuda' else None)


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ['train', 'val']:
        loader = DataLoader(Windows(split), batch_size=batch_size, shuffle=False, drop_last=True)
        losses = torch.zeros(eval_iters)
        for k, (X, Y) in zip(range(eval_iters), loader):
            with ctx:
                logits, loss = model(X.to(device), Y.to(device))
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


def get_lr(it):
    if it < warmup_iters:  # linear warmup
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))  # cosine from 1 down to 0
    return min_lr + coeff * (learning_rate - min_lr)


# ---------------------------------------------------------------------- training
X, Y = get_batch('train', iter_num * gradient_accumulation_steps)
t0 = time.time()
local_iter_num = 0
raw_model = model.module if ddp else model
running_mfu = -1.0
loss_history = []
while True:
    lr = get_lr(iter_num) if decay_lr else learning_rate
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr

    if iter_num % eval_interval == 0 and master_process:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        if losses['val'] < best_val_loss or always_save_checkpoint:
            best_val_loss = losses['val']
            if iter_num > 0 or save_init:
                checkpoint = {
                    'model': raw_model.state_dict(),
                    'optimizer': optimizer.state_dict(),
                    'model_args': model_args,
                    'iter_num': iter_num,
                    'best_val_loss': best_val_loss,
                    'config': config,
                }
                print(f"saving checkpoint to {out_dir}")
                torch.save(checkpoint, os.path.join(out_dir, 'ckpt.pt'))
    if eval_only or iter_num >= max_iters:
        break

    for micro_step in range(gradient_accumulation_steps):
        if ddp:  # average the gradients over the ranks only on the last micro-step
            model.require_backward_grad_sync = (micro_step == gradient_accumulation_steps - 1)
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps
        X, Y = get_batch('train', iter_num * gradient_accumulation_steps + micro_step + 1)
        scaler.scale(loss).backward()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)

    t1 = time.time()
    dt, t0 = t1 - t0, t1
    lossf = loss.item() * gradient_accumulation_steps
    loss_history.append(lossf)
    if iter_num % log_interval == 0 and master_process:
        if local_iter_num >= 5:
            mfu = raw_model.estimate_mfu(batch_size * gradient_accumulation_steps, dt)
            running_mfu = mfu if running_mfu == -1.0 else 0.9 * running_mfu + 0.1 * mfu
        print(f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms, mfu {running_mfu * 100:.2f}%")
    iter_num += 1
    local_iter_num += 1

if ddp:
    destroy_process_group()
