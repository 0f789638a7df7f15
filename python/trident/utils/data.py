"""trident.utils.data: torch.utils.data's Dataset, TensorDataset, Subset, random_split and DataLoader, plus
FashionMNIST / MNIST read by the C library's IDX loader (td_mnist_load).

A DataLoader over a TensorDataset (or a Subset of one) gathers each batch with one index_select per field, in C;
over any other Dataset it stacks the items (default_collate). Shuffling draws from Trident's generator, so
trident.manual_seed fixes the order. With num_workers > 0 over a TensorDataset, the C library's DataLoader
(td_dataloader_*) builds the batches in that many threads ahead of the training loop (its shuffle is Philox keyed
by a seed drawn from the generator once, varied by the epoch: another order than num_workers=0's, as in torch);
other datasets load in the calling thread."""
from .. import _C
from .._random import default_generator
from .._signatures import FUNCTIONS as _F
from .._tensor import Tensor, int64, tensor as _tensor


class Dataset:
    def __getitem__(self, index):
        raise NotImplementedError("Dataset: define __getitem__")

    def __add__(self, other):
        raise NotImplementedError("Dataset: ConcatDataset is not provided")


class TensorDataset(Dataset):
    """Items are (t[i] for t in tensors); all tensors have the same first dimension."""

    def __init__(self, *tensors):
        if not tensors or any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError("TensorDataset: tensors of one size along the first dimension")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, list(indices)

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def _randperm(n, generator):
    """A random permutation of range(n): the order of n uniform draws from generator."""
    keys = _F["rand"](n, generator=generator).tolist() if n else []
    return sorted(range(n), key=keys.__getitem__)


def random_split(dataset, lengths, generator=None):
    """Subsets of the given lengths (or fractions summing to 1) in a random order."""
    n = len(dataset)
    if all(isinstance(v, float) for v in lengths) and abs(sum(lengths) - 1) < 1e-9:
        counts = [int(v * n) for v in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("random_split: the lengths do not sum to the length of the dataset")
    perm, out, start = _randperm(n, generator), [], 0
    for k in lengths:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out


def default_collate(items):
    """A batch from a list of items: tensors are stacked, numbers become a tensor, tuples are collated per field."""
    first = items[0]
    if isinstance(first, Tensor):
        return _F["stack"](items)
    if isinstance(first, (int, float)):
        return _tensor(items)
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate(list(f)) for f in zip(*items))
    if isinstance(first, dict):
        return {k: default_collate([d[k] for d in items]) for k in first}
    return items


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, num_workers=0, collate_fn=None,
                 drop_last=False, generator=None, pin_memory=False):
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.sampler, self.collate_fn, self.generator = sampler, collate_fn, generator
        self.num_workers = num_workers
        self._c_loader, self._epoch = None, 0

    def __len__(self):
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _indices(self):
        if self.sampler is not None:
            return list(self.sampler)
        n = len(self.dataset)
        return _randperm(n, self.generator or default_generator) if self.shuffle else list(range(n))

    def _fields(self):
        """(tensors, base indices or None) when batches can be gathered in C."""
        ds, base = self.dataset, None
        if isinstance(ds, Subset) and isinstance(ds.dataset, TensorDataset):
            ds, base = ds.dataset, ds.indices
        if self.collate_fn is None and type(ds) is TensorDataset:
            return ds.tensors, base
        return None, None

    def _c_iter(self, tensors):
        """Batches from the C DataLoader's worker threads (num_workers > 0 over a TensorDataset)."""
        if self._c_loader is None:
            seed = int(_C.item(_F["randint"](0, 2**62, (), generator=self.generator)._h))
            device = str(tensors[0].device)
            host = tuple(t.cpu() for t in tensors)
            self._c_loader = _C.loader_new(host, self.batch_size, self.shuffle, seed, self.drop_last,
                                           self.num_workers, device)
        _C.loader_start(self._c_loader, self._epoch)
        self._epoch += 1
        while True:
            batch = _C.loader_next(self._c_loader)
            if batch is None:
                return
            yield tuple(Tensor(h) for h in batch)

    def __iter__(self):
        if self.num_workers > 0 and self.sampler is None and self.collate_fn is None and \
                type(self.dataset) is TensorDataset:
            yield from self._c_iter(self.dataset.tensors)
            return
        idx = self._indices()
        tensors, base = self._fields()
        for s in range(0, len(idx), self.batch_size):
            chunk = idx[s:s + self.batch_size]
            if len(chunk) < self.batch_size and self.drop_last:
                return
            if tensors is not None:
                ix = _tensor([base[i] for i in chunk] if base is not None else chunk, dtype=int64)
                yield tuple(Tensor(_C.index_select(t._h, 0, ix.to(t.device)._h)) for t in tensors)
            else:
                yield (self.collate_fn or default_collate)([self.dataset[i] for i in chunk])


class CIFAR10(TensorDataset):
    """CIFAR-10 from root (the binary version: root or root/cifar-10-batches-bin holds data_batch_1..5.bin and
    test_batch.bin): images float32 [N, 3, 32, 32] in [0, 1], labels int64 [N]. download and transforms are not
    supported."""

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        import os

        if transform is not None or target_transform is not None:
            raise ValueError("CIFAR10: transforms are not supported; transform the batches")
        d = os.path.join(root, "cifar-10-batches-bin")
        d = d if os.path.isdir(d) else str(root)
        names = [f"data_batch_{i}.bin" for i in range(1, 6)] if train else ["test_batch.bin"]
        x, y = _C.cifar10_load(tuple(os.path.join(d, n) for n in names))
        super().__init__(Tensor(x), Tensor(y))
        self.data, self.targets = self.tensors


class MNIST(TensorDataset):
    """MNIST from root (the {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] files): images float32 [N, 1, 28, 28]
    in [0, 1], labels int64 [N]. download is not supported (the files must be there)."""

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        if transform is not None or target_transform is not None:
            raise ValueError(f"{type(self).__name__}: transforms are not supported; transform the batches")
        x, y = _C.mnist_load(str(root), bool(train))
        super().__init__(Tensor(x).reshape(-1, 1, 28, 28), Tensor(y))
        self.data, self.targets = self.tensors


class FashionMNIST(MNIST):
    """Fashion-MNIST (the same files and layout as MNIST)."""


__all__ = ["Dataset", "TensorDataset", "Subset", "random_split", "default_collate", "DataLoader", "MNIST",
           "FashionMNIST", "CIFAR10"]
