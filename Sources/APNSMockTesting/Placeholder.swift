import APNSMock
