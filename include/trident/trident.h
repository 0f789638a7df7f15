/*
** Trident: neural-network training in C on CPU, CUDA and Vulkan.
** Include this header for the whole public API.
*/
#ifndef TRIDENT_H
#define TRIDENT_H

#include "amp.h"
#include "autograd.h"
#include "data.h"
#include "device.h"
#include "dist.h"
#include "dlpack.h"
#include "io.h"
#include "kernel.h"
#include "math.h"
#include "nn.h"
#include "ops.h"
#include "optim.h"
#include "profile.h"
#include "status.h"
#include "tensor.h"

#endif /* TRIDENT_H */
