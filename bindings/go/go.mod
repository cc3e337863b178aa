// SPDX-License-Identifier: Apache-2.0

module libreshard.dev/reshard

go 1.19
